//! The unary kernel's CPU reference, error bound and parity check.

use super::*;
use crate::device::Gpu;
use crate::parity::data::{Rng, random_f32};
use crate::parity::{Check, Compare, U, run_read};
use crate::tensor::GpuTensor;

impl UnaryOp {
    /// CPU reference, in f64.
    pub fn apply(self, x: f64, value: f64) -> f64 {
        match self {
            UnaryOp::Scale => x * value,
            UnaryOp::SoftCap => value * (x / value).tanh(),
        }
    }
}

/// Bound on |gpu - ref| of one element (see [`CHECK`]).
pub fn bound(op: UnaryOp, x: f64, value: f64, reference: f64) -> f64 {
    match op {
        UnaryOp::Scale => U * reference.abs(),
        UnaryOp::SoftCap => {
            let y = (x / value).abs();
            value.abs() * (4.0 * (3.0 + 2.0 * y) * 2.0 * U + 4.0 * U)
        }
    }
}

/// Tolerance: scale is one correctly rounded product (half an ulp, `2^-24 |ref|`). Soft-cap:
/// Vulkan defines tanh through sinh/cosh, i.e. through exp, whose error is (3 + 2|y|) ulp
/// (y = x / c); tanh = (e^y - e^-y) / (e^y + e^-y) then errs by at most about
/// 4 (3 + 2|y|) 2^-23 absolute, times c, plus the division x / c and the final product.
pub const CHECK: Check = Check {
    name: "scale / softcap",
    tolerance: "scale 2^-24|ref|; softcap c*(4(3+2|x/c|)2^-23 + 2^-22)",
    case: parity_case,
};

fn parity_case(gpu: &Gpu, rng: &mut Rng) -> Result<Compare, GpuError> {
    let op = rng.pick(&[UnaryOp::SoftCap, UnaryOp::Scale]);
    let n = rng.range(1, 2000);
    let off = rng.range(0, 4);
    let value = [0.0625, 1.0 / 3.0, 30.0, 50.0][rng.range(0, 4)];
    // Inputs span [-100, 100] so the cap saturates for some.
    let x: Vec<f32> = random_f32(n + off, rng.next_u64())
        .iter()
        .map(|v| v * 100.0)
        .collect();
    let xt = GpuTensor::from_f32(gpu, &[n + off], &x);
    // Half the cases out of place, into another tensor at another offset (the input then
    // left as it was).
    let y: Vec<f32> = match rng.bool() {
        false => run_read(
            gpu,
            vec![unary(op, View::at(&xt, off), n, value)?],
            &xt,
            off,
            n,
        )?,
        true => {
            let y_off = rng.range(0, 4);
            let yt = GpuTensor::zeros(gpu, &[n + y_off], crate::tensor::Dtype::F32);
            let op = unary_out(op, View::at(&xt, off), View::at(&yt, y_off), n, value)?;
            run_read(gpu, vec![op], &yt, y_off, n)?
        }
    };
    let mut c = Compare::default();
    for i in 0..n {
        let xi = f64::from(x[off + i]);
        let want = op.apply(xi, f64::from(value));
        let b = bound(op, xi, f64::from(value), want);
        c.add(f64::from(y[i]), want, b, || {
            format!("{op:?}({xi}, {value}) elem {i}")
        });
    }
    Ok(c)
}

#[cfg(test)]
mod tests {
    use crate::testutil;

    #[test]
    fn unary_matches_reference() {
        testutil::parity("scale / softcap", 6, 31);
    }
}
