//! The argmax kernel's CPU reference and parity check.

use super::*;
use crate::device::Gpu;
use crate::parity::data::{Rng, random_f32};
use crate::parity::{Check, Compare, run_read};
use crate::tensor::GpuTensor;

/// CPU reference: first index of the maximum, NaNs ignored (`u32::MAX` if all are NaN).
pub fn argmax_ref(x: &[f32]) -> u32 {
    let mut best: Option<(usize, f32)> = None;
    for (i, &v) in x.iter().enumerate() {
        if !v.is_nan() && best.is_none_or(|(_, b)| v > b) {
            best = Some((i, v));
        }
    }
    best.map_or(u32::MAX, |(i, _)| i as u32)
}

/// Tolerance: exact (comparisons only). Values are drawn from 16 levels so ties occur.
pub const CHECK: Check = Check {
    name: "argmax",
    tolerance: "exact",
    case: parity_case,
};

fn parity_case(gpu: &Gpu, rng: &mut Rng) -> Result<Compare, GpuError> {
    let n = rng.range(1, 5000);
    let x: Vec<f32> = random_f32(n, rng.next_u64())
        .iter()
        .map(|v| (v * 8.0).round())
        .collect();
    let xt = GpuTensor::from_f32(gpu, &[n], &x);
    let out = GpuTensor::from_u32(gpu, &[2], &[7, 7]);
    let got: Vec<u32> = run_read(
        gpu,
        vec![argmax((&xt).into(), n, View::at(&out, 1))?],
        &out,
        0,
        2,
    )?;
    let mut c = Compare::default();
    c.exact(f64::from(got[0]), 7.0, || "untouched neighbour".into());
    c.exact(f64::from(got[1]), f64::from(argmax_ref(&x)), || {
        format!("argmax of {n}")
    });
    Ok(c)
}

#[cfg(test)]
mod tests {
    use crate::testutil;

    #[test]
    fn argmax_matches_reference() {
        testutil::parity("argmax", 6, 51);
    }
}
