//! Element-wise ops, each value computed in f64 and rounded once.

use super::tensor::{CpuTensor, CpuWeight};
use crate::config::Activation;

pub(crate) fn map(x: &CpuTensor, f: impl Fn(f64) -> f64) -> CpuTensor {
    let data = x.data.iter().map(|&v| f(v as f64) as f32).collect();
    CpuTensor::new(x.rows, x.cols, data)
}

fn zip(a: &CpuTensor, b: &CpuTensor, f: impl Fn(f64, f64) -> f64) -> CpuTensor {
    assert_eq!(
        (a.rows, a.cols),
        (b.rows, b.cols),
        "element-wise shapes differ"
    );
    let data = a
        .data
        .iter()
        .zip(&b.data)
        .map(|(&x, &y)| f(x as f64, y as f64) as f32)
        .collect();
    CpuTensor::new(a.rows, a.cols, data)
}

pub(crate) fn add(a: &CpuTensor, b: &CpuTensor) -> CpuTensor {
    zip(a, b, |x, y| x + y)
}

pub(crate) fn add_bias(x: &CpuTensor, bias: &CpuWeight) -> CpuTensor {
    let bias = bias.vector();
    assert_eq!(bias.len(), x.cols, "add_bias: bias length vs width");
    let mut out = x.clone();
    for row in out.data.chunks_mut(x.cols) {
        for (v, &b) in row.iter_mut().zip(bias) {
            *v = (*v as f64 + b as f64) as f32;
        }
    }
    out
}

/// GELU, tanh approximation (PyTorch `gelu(approximate="tanh")`, ggml `gelu`).
pub(crate) fn gelu_tanh(x: f64) -> f64 {
    const SQRT_2_OVER_PI: f64 = 0.797_884_560_802_865_4;
    0.5 * x * (1.0 + (SQRT_2_OVER_PI * (x + 0.044_715 * x * x * x)).tanh())
}

pub(crate) fn silu(x: f64) -> f64 {
    x / (1.0 + (-x).exp())
}

pub(crate) fn glu(gate: &CpuTensor, up: &CpuTensor, act: Activation) -> CpuTensor {
    match act {
        Activation::GeluTanh => zip(gate, up, |g, u| gelu_tanh(g) * u),
        Activation::Silu => zip(gate, up, |g, u| silu(g) * u),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn activations() {
        // The tanh formula and x * sigmoid(x), evaluated in Python (f64).
        assert!((gelu_tanh(1.0) - 0.841_191_990_608_276_8).abs() < 1e-12);
        assert!((gelu_tanh(-0.5) + 0.154_285_990_174_856_06).abs() < 1e-12);
        assert!((silu(1.0) - 0.731_058_578_630_004_9).abs() < 1e-12);
        let g = CpuTensor::new(1, 2, vec![1.0, 0.0]);
        let u = CpuTensor::new(1, 2, vec![2.0, 5.0]);
        let y = glu(&g, &u, Activation::Silu);
        assert!((y.data[0] - 1.462_117_2).abs() < 1e-6 && y.data[1] == 0.0);
        let b = CpuWeight::from_f32_vector(vec![1.0, -1.0]);
        assert_eq!(add_bias(&u, &b).data, [3.0, 4.0]);
        assert_eq!(add(&g, &u).data, [3.0, 5.0]);
    }
}
