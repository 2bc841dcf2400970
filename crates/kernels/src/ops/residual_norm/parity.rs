//! The residual kernel's CPU reference and parity check.

use super::*;
use crate::device::Gpu;
use crate::ops::norm::RmsNorm;
use crate::parity::data::{Rng, random_f32};
use crate::parity::{Check, Compare, U};
use crate::readback::Readback;
use crate::step::StepBuilder;
use crate::tensor::Dtype;

impl ResidualNorm {
    /// CPU reference in f64: updates `h` (each element rounded once to f32) and returns `y`
    /// when `w_out` is given (the f64 norm of the rounded h).
    pub fn reference(
        self,
        a: &[f32],
        w_in: Option<&[f32]>,
        h: &mut [f32],
        w_out: Option<&[f32]>,
    ) -> Option<Vec<f32>> {
        let n = self.n;
        for (ar, hr) in a.chunks_exact(n).zip(h.chunks_exact_mut(n)) {
            let added = self.pre(ar, w_in);
            for (hv, d) in hr.iter_mut().zip(added) {
                *hv = (f64::from(*hv) + d) as f32;
            }
        }
        let norm = RmsNorm {
            n,
            n_rows: self.n_rows,
            eps: self.eps,
        };
        w_out.map(|w| norm.reference(&h[..n * self.n_rows], Some(w)))
    }

    /// One row of `a'` in f64: `a / rms(a) * w_in`, or `a`.
    pub(crate) fn pre(self, a: &[f32], w_in: Option<&[f32]>) -> Vec<f64> {
        let Some(w) = w_in else {
            return a.iter().map(|&v| f64::from(v)).collect();
        };
        let ss: f64 = a.iter().map(|&v| f64::from(v) * f64::from(v)).sum();
        let r = 1.0 / (ss / a.len() as f64 + f64::from(self.eps)).sqrt();
        a.iter()
            .zip(w)
            .map(|(&v, &g)| f64::from(v) * r * f64::from(g))
            .collect()
    }
}

/// Tolerance. h with the pre-norm: `(n/2 + 8) u |a'| + 2 u |h_new|`: a' = a / rms(a) * w_in
/// carries rms_norm's bound (the sum of n squares errs <= n u relative, halved by the square
/// root; division, sqrt, eps and the products a few u), and the add rounds once on the GPU
/// and once in the reference. h without it: exact (one correctly rounded f32 add on both
/// sides). y: rms_norm's bound `(n/2 + 8) u |y|` against the f64 norm of the h the GPU wrote
/// (so h's rounding is not counted twice).
pub const CHECK: Check = Check {
    name: "residual_norm",
    tolerance: "h: (n/2+8)u|a'|+2u|h| (or exact); y: (n/2+8)u|y|",
    case: parity_case,
};

/// One random shape: `(n, n_rows, pre_norm, out_norm)`.
type Shape = (usize, usize, bool, bool);

fn parity_case(gpu: &Gpu, rng: &mut Rng) -> Result<Compare, GpuError> {
    let n = match rng.range(0, 3) {
        0 => rng.pick(&[1, 64, 576, 640, 1152, 2048, 4096, 4097, 8192]),
        1 => rng.range(1, 1000),
        _ => rng.range(1000, 9000),
    };
    let shape = (n, rng.range(1, 5), rng.bool(), rng.bool());
    compare(gpu, shape, rng.next_u64())
}

fn compare(gpu: &Gpu, shape: Shape, seed: u64) -> Result<Compare, GpuError> {
    let (n, n_rows, pre_norm, out_norm) = shape;
    let op = ResidualNorm {
        n,
        n_rows,
        eps: 1e-6,
    };
    let len = n * n_rows;
    // a at a different scale than h, as attention output against the residual stream.
    let a: Vec<f32> = random_f32(len, seed).iter().map(|v| v * 3.0).collect();
    let h = random_f32(len, seed ^ 1);
    let w_in = random_f32(n, seed ^ 2);
    let w_out = random_f32(n, seed ^ 3);
    // Offsets: a at 3, h at 1, y at 2 (odd, so nothing relies on alignment).
    let at = GpuTensor::from_f32(gpu, &[len + 3], &[&[7.0; 3], &a[..]].concat());
    let ht = GpuTensor::from_f32(gpu, &[len + 1], &[&[5.0], &h[..]].concat());
    let yt = GpuTensor::zeros(gpu, &[len + 2], Dtype::F32);
    let wit = GpuTensor::from_f32(gpu, &[n], &w_in);
    let wot = GpuTensor::from_f32(gpu, &[n], &w_out);
    let out = out_norm.then_some(NormOut {
        y: View::at(&yt, 2),
        weight: &wot,
    });
    let built = op.op(
        View::at(&at, 3),
        pre_norm.then_some(&wit),
        View::at(&ht, 1),
        out,
    )?;
    let mut b = StepBuilder::new();
    b.push(built);
    let mut step = b.build(gpu);
    let rb = Readback::new(gpu, (len * 4) as u64);
    let mut h_gpu = vec![0f32; len];
    rb.run_and_read(gpu, &mut step, &ht, 1, &mut h_gpu)?;
    let mut y_gpu = vec![0f32; len];
    if out_norm {
        rb.read(gpu, &yt, 2, &mut y_gpu)?;
    }

    let mut c = Compare::default();
    let at_ = |what: &'static str, i: usize| {
        move || format!("n {n} rows {n_rows} pre {pre_norm} out {out_norm} {what} {i}")
    };
    let mut h_ref = h.clone();
    op.reference(&a, pre_norm.then_some(&w_in), &mut h_ref, None);
    let ulps = (n / 2 + 8) as f64;
    for (i, (&g, &r)) in h_gpu.iter().zip(&h_ref).enumerate() {
        let (g, r) = (f64::from(g), f64::from(r));
        if pre_norm {
            let row = &a[i / n * n..][..n];
            let ap = op.pre(row, Some(&w_in))[i % n].abs();
            c.add(g, r, ulps * U * ap + 2.0 * U * r.abs() + 1e-30, at_("h", i));
        } else {
            c.exact(g, r, at_("h", i));
        }
    }
    if out_norm {
        let norm = RmsNorm {
            n,
            n_rows,
            eps: op.eps,
        };
        let y_ref = norm.reference(&h_gpu, Some(&w_out));
        for (i, (&g, &r)) in y_gpu.iter().zip(&y_ref).enumerate() {
            let bound = ulps * U * f64::from(r.abs()) + 1e-30;
            c.add(f64::from(g), f64::from(r), bound, at_("y", i));
        }
    }
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil;

    #[test]
    fn residual_norm_matches_reference() {
        testutil::parity("residual_norm", 8, 23);
    }

    /// Every variant at gemma's width (640), smollm2's (576), a tile of each group count
    /// (1500: 2 groups; 2560, gemma3-4b: 3; 4096: 4), and past one tile (8192, 4097: the
    /// re-reading path), with several rows.
    #[test]
    fn variants_and_tiles() {
        let Some(gpu) = testutil::gpu() else { return };
        for n in [576, 640, 1500, 2560, 4096, 4097, 8192] {
            for (pre, out) in [(false, false), (true, false), (false, true), (true, true)] {
                let c = compare(gpu, (n, 3, pre, out), n as u64).unwrap();
                assert!(c.max_ratio <= 1.0, "{}", c.worst);
            }
        }
    }

    #[test]
    fn rejects_aliased_buffers() {
        let Some(gpu) = testutil::gpu() else { return };
        let t = GpuTensor::zeros(gpu, &[128], Dtype::F32);
        let op = ResidualNorm {
            n: 64,
            n_rows: 1,
            eps: 1e-6,
        };
        assert!(op.op(View::at(&t, 64), None, View::from(&t), None).is_err());
    }
}
