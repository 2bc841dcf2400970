//! The glu kernel's CPU reference, error bound and parity check.

use super::*;
use crate::device::Gpu;
use crate::parity::data::{Rng, random_f32};
use crate::parity::{Check, Compare, run_read};
use crate::tensor::Dtype;
use crate::tensor::GpuTensor;

impl Activation {
    /// CPU reference, in f64.
    pub fn apply(self, x: f64) -> f64 {
        match self {
            Activation::GeluTanh => {
                let c = (2.0 / std::f64::consts::PI).sqrt();
                0.5 * x * (1.0 + (c * (x + 0.044715 * x * x * x)).tanh())
            }
            Activation::Silu => x / (1.0 + (-x).exp()),
        }
    }
}

/// CPU reference.
pub fn glu_ref(act: Activation, gate: &[f32], up: &[f32]) -> Vec<f32> {
    gate.iter()
        .zip(up)
        .map(|(&g, &u)| (act.apply(f64::from(g)) * f64::from(u)) as f32)
        .collect()
}

/// The bound on one output of the GLU: 2^-16 * (|g| + 1) * |up| (see [`CHECK`]).
pub fn tolerance(gate: f32, up: f32) -> f64 {
    f64::from(gate.abs() + 1.0) * f64::from(up.abs()) / 65536.0
}

/// Tolerance: |gpu - ref| <= 2^-16 * (|g| + 1) * |up|. WGSL leaves tanh's and exp's
/// accuracy to the platform (Vulkan: exp within 3 + 2|x| ulp, tanh inherited from
/// sinh/cosh), so only a few-ulp relative bound holds on the activation; scaled by
/// (|g| + 1) because the activation is ~|g| for large gates and ~0.5 near zero.
pub const CHECK: Check = Check {
    name: "glu",
    tolerance: "2^-16*(|g|+1)*|up|",
    case: parity_case,
};

fn parity_case(gpu: &Gpu, rng: &mut Rng) -> Result<Compare, GpuError> {
    let act = rng.pick(&[Activation::Silu, Activation::GeluTanh]);
    compare(gpu, act, rng.range(1, 3000), rng.next_u64())
}

fn compare(gpu: &Gpu, act: Activation, n: usize, seed: u64) -> Result<Compare, GpuError> {
    // Gate|up fused in one tensor, as the fused matvec writes them; gates span [-8, 8].
    let mut gu = random_f32(2 * n, seed);
    gu[..n].iter_mut().for_each(|g| *g *= 8.0);
    let gut = GpuTensor::from_f32(gpu, &[2 * n], &gu);
    let out = GpuTensor::zeros(gpu, &[n], Dtype::F32);
    let op = glu(act, (&gut).into(), View::at(&gut, n), (&out).into(), n)?;
    let y: Vec<f32> = run_read(gpu, vec![op], &out, 0, n)?;
    let want = glu_ref(act, &gu[..n], &gu[n..]);
    let mut c = Compare::default();
    for i in 0..n {
        c.add(
            f64::from(y[i]),
            f64::from(want[i]),
            tolerance(gu[i], gu[n + i]),
            || format!("{act:?} {i}: gate {}", gu[i]),
        );
    }
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil;

    #[test]
    fn glu_matches_reference() {
        testutil::parity("glu", 4, 41);
    }

    #[test]
    fn both_activations() {
        let Some(gpu) = testutil::gpu() else { return };
        for (act, n) in [(Activation::GeluTanh, 2048), (Activation::Silu, 1536)] {
            let c = compare(gpu, act, n, n as u64).unwrap();
            assert!(c.max_ratio <= 1.0, "{}", c.worst);
        }
    }
}
