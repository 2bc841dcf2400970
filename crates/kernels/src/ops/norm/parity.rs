//! The RMS norm's CPU reference and parity check.

use super::*;
use crate::device::Gpu;
use crate::parity::data::{Rng, random_f32};
use crate::parity::{Check, Compare, U, run_read};
use crate::tensor::Dtype;

impl RmsNorm {
    /// CPU reference, in f64.
    pub fn reference(self, x: &[f32], weight: Option<&[f32]>) -> Vec<f32> {
        let wide = |v: &[f32]| v.iter().map(|&a| f64::from(a)).collect::<Vec<f64>>();
        let w = weight.map(wide);
        self.reference_f64(&wide(x), w.as_deref())
            .into_iter()
            .map(|v| v as f32)
            .collect()
    }

    /// The same over f64 inputs, unrounded: what the backward's finite differences perturb.
    pub fn reference_f64(self, x: &[f64], weight: Option<&[f64]>) -> Vec<f64> {
        let mut y = Vec::with_capacity(x.len());
        for row in x.chunks_exact(self.n).take(self.n_rows) {
            let ss: f64 = row.iter().map(|&v| v * v).sum();
            let r = 1.0 / (ss / self.n as f64 + f64::from(self.eps)).sqrt();
            for (i, &v) in row.iter().enumerate() {
                y.push(v * r * weight.map_or(1.0, |w| w[i]));
            }
        }
        y
    }
}

/// Tolerance: |gpu - ref| <= (n/2 + 8) * 2^-24 * |ref|. The sum of squares of n terms errs
/// by at most n*u relative (all terms positive), which the square root halves; 1/sqrt, the
/// division by n, the eps add and the two products add a few u more (WGSL allows 2.5 ulp
/// for division and sqrt). The reference is f64.
pub const CHECK: Check = Check {
    name: "rms_norm",
    tolerance: "(n/2+8)*2^-24*|ref|",
    case: parity_case,
};

fn parity_case(gpu: &Gpu, rng: &mut Rng) -> Result<Compare, GpuError> {
    let n = if rng.bool() {
        rng.pick(&[64, 128, 256, 640])
    } else {
        rng.range(1, 700)
    };
    compare(
        gpu,
        n,
        rng.range(1, 5),
        rng.bool(),
        rng.bool(),
        rng.next_u64(),
    )
}

fn compare(
    gpu: &Gpu,
    n: usize,
    n_rows: usize,
    weighted: bool,
    in_place: bool,
    seed: u64,
) -> Result<Compare, GpuError> {
    let norm = RmsNorm {
        n,
        n_rows,
        eps: 1e-6,
    };
    let x = random_f32(n * n_rows, seed);
    let w = random_f32(n, seed ^ 5);
    let xt = GpuTensor::from_f32(gpu, &[n_rows * n + 2], &[&[9.0, 9.0], &x[..]].concat());
    let wt = GpuTensor::from_f32(gpu, &[n], &w);
    let yt = GpuTensor::zeros(gpu, &[n_rows * n + 1], Dtype::F32);
    let weight = weighted.then_some(&wt);
    let (op, out, off) = if in_place {
        (norm.op_inplace(View::at(&xt, 2), weight)?, &xt, 2)
    } else {
        (norm.op(View::at(&xt, 2), View::at(&yt, 1), weight)?, &yt, 1)
    };
    let y: Vec<f32> = run_read(gpu, vec![op], out, off, n * n_rows)?;
    let want = norm.reference(&x, weighted.then_some(&w[..]));
    let ulps = (n / 2 + 8) as f64;
    let mut c = Compare::default();
    for (i, (g, r)) in y.iter().zip(&want).enumerate() {
        let bound = ulps * U * f64::from(r.abs()) + 1e-30;
        c.add(f64::from(*g), f64::from(*r), bound, || {
            format!("n {n} rows {n_rows} weighted {weighted} in_place {in_place} elem {i}")
        });
    }
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil;

    #[test]
    fn rms_norm_matches_reference() {
        testutil::parity("rms_norm", 6, 11);
    }

    /// Gemma's shapes: the 640-wide vector and per-head q norms over [4, 256], in place too.
    #[test]
    fn gemma_shapes() {
        let Some(gpu) = testutil::gpu() else { return };
        for (n, rows, weighted, in_place) in [
            (640, 1, true, false),
            (256, 4, true, false),
            (256, 1, false, false),
            (256, 4, true, true),
            (256, 1, false, true),
        ] {
            let c = compare(gpu, n, rows, weighted, in_place, n as u64).unwrap();
            assert!(c.max_ratio <= 1.0, "{}", c.worst);
        }
    }
}
