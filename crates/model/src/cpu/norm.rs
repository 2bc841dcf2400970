//! RMS norm over groups of a row (whole rows, or heads).

use super::tensor::{CpuTensor, CpuWeight};
use crate::backend::RmsNormParams;

pub(crate) fn rms_norm(x: &CpuTensor, p: &RmsNormParams<'_, CpuWeight>) -> CpuTensor {
    assert!(
        p.group > 0 && x.cols.is_multiple_of(p.group),
        "rms_norm: group {} vs width {}",
        p.group,
        x.cols
    );
    let weight = p.weight.map(CpuWeight::vector);
    if let Some(w) = weight {
        assert_eq!(w.len(), p.group, "rms_norm: weight length vs group");
    }
    let mut out = x.clone();
    for group in out.data.chunks_mut(p.group) {
        let ss: f64 = group.iter().map(|&v| v as f64 * v as f64).sum();
        let inv = 1.0 / (ss / p.group as f64 + p.eps as f64).sqrt();
        for (i, v) in group.iter_mut().enumerate() {
            let g = weight.map_or(1.0, |w| w[i] as f64);
            *v = (*v as f64 * inv * g) as f32;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_and_heads() {
        let x = CpuTensor::new(1, 4, vec![1.0, 2.0, 3.0, 4.0]);
        let w = CpuWeight::from_f32_vector(vec![1.0, 2.0, 0.5, 1.0]);
        let p = RmsNormParams {
            weight: Some(&w),
            eps: 0.0,
            group: 4,
        };
        let rms = (30.0f64 / 4.0).sqrt();
        let y = rms_norm(&x, &p);
        let want = [1.0 / rms, 4.0 / rms, 1.5 / rms, 4.0 / rms];
        for (a, b) in y.data.iter().zip(want) {
            assert!((*a as f64 - b).abs() < 1e-6);
        }
        // Per head of 2, no weight, eps 1: [1,2] -> rms sqrt(2.5 + 1).
        let p = RmsNormParams {
            weight: None,
            eps: 1.0,
            group: 2,
        };
        let y = rms_norm(&x, &p);
        let (r0, r1) = ((2.5f64 + 1.0).sqrt(), (12.5f64 + 1.0).sqrt());
        let want = [1.0 / r0, 2.0 / r0, 3.0 / r1, 4.0 / r1];
        for (a, b) in y.data.iter().zip(want) {
            assert!((*a as f64 - b).abs() < 1e-6);
        }
    }
}
