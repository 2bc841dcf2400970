//! The RMS norm backward's CPU reference, its finite-difference test and its parity check.

use super::*;
use crate::device::Gpu;
use crate::parity::data::{Rng, random_f32};
use crate::parity::{Check, Compare, U, run_read};
use crate::tensor::Dtype;

/// CPU reference, in f64: `(dx, dg)` for `y = x / rms(x) * g` row by row, with `dx = r (dy g -
/// xhat mean(dy g xhat))` and `dg_i = sum over rows of dy_i xhat_i` (the gain's gradient;
/// empty when `weight` is `None`).
pub fn rms_norm_backward_ref(
    norm: RmsNorm,
    x: &[f64],
    weight: Option<&[f64]>,
    dy: &[f64],
) -> (Vec<f64>, Vec<f64>) {
    let n = norm.n;
    let mut dx = Vec::with_capacity(n * norm.n_rows);
    let mut dg = vec![0.0; if weight.is_some() { n } else { 0 }];
    for (xr, dyr) in x.chunks_exact(n).zip(dy.chunks_exact(n)).take(norm.n_rows) {
        let ss: f64 = xr.iter().map(|v| v * v).sum();
        let r = 1.0 / (ss / n as f64 + f64::from(norm.eps)).sqrt();
        let g = |i: usize| weight.map_or(1.0, |w| w[i]);
        let mean: f64 = (0..n).map(|i| dyr[i] * g(i) * xr[i] * r).sum::<f64>() / n as f64;
        for i in 0..n {
            dx.push(r * (dyr[i] * g(i) - xr[i] * r * mean));
        }
        for (i, d) in dg.iter_mut().enumerate() {
            *d += dyr[i] * xr[i] * r;
        }
    }
    (dx, dg)
}

/// Tolerance, per element: `(n/2 + 10) u A_i + (5n/2 + 32) u B_i` with `A_i = r |dy_i g_i|`
/// and `B_i = |x_i| r^2 S / n`, `S = sum_j |dy_j g_j x_j|`. The kernel computes `dx_i = r dy_i
/// g_i - x_i k`, `k = r^3 dot / n`: r errs as the forward's (`(n/2 + 8) u` relative: a sum of
/// n squares halved by the square root, plus the divisions' 2.5 ulp), once in the first term
/// (plus its two products) and three times in k; the dot product of n terms errs by `(n + 2) u
/// S` (any order of summation); `|x_i k|` is at most B_i; the final difference adds u.
pub const CHECK: Check = Check {
    name: "rms_norm_backward",
    tolerance: "(n/2+10)u r|dy g| + (5n/2+32)u |x| r^2 sum|dy g x|/n",
    case: parity_case,
};

fn parity_case(gpu: &Gpu, rng: &mut Rng) -> Result<Compare, GpuError> {
    let n = if rng.bool() {
        rng.pick(&[64, 128, 256, 640])
    } else {
        rng.range(1, 700)
    };
    compare(gpu, n, rng.range(1, 5), rng.bool(), rng.next_u64())
}

fn compare(
    gpu: &Gpu,
    n: usize,
    n_rows: usize,
    weighted: bool,
    seed: u64,
) -> Result<Compare, GpuError> {
    let norm = RmsNorm {
        n,
        n_rows,
        eps: 1e-6,
    };
    let len = n * n_rows;
    let x = random_f32(len, seed);
    let dy = random_f32(len, seed ^ 3);
    let w = random_f32(n, seed ^ 5);
    let xt = GpuTensor::from_f32(gpu, &[len + 2], &[&[9.0, 9.0], &x[..]].concat());
    let dyt = GpuTensor::from_f32(gpu, &[len + 1], &[&[9.0], &dy[..]].concat());
    let wt = GpuTensor::from_f32(gpu, &[n], &w);
    let dxt = GpuTensor::zeros(gpu, &[len + 3], Dtype::F32);
    let weight = weighted.then_some(&wt);
    let op = norm.backward_op(
        View::at(&xt, 2),
        View::at(&dyt, 1),
        View::at(&dxt, 3),
        weight,
    )?;
    let got: Vec<f32> = run_read(gpu, vec![op], &dxt, 3, len)?;
    let wide = |v: &[f32]| v.iter().map(|&a| f64::from(a)).collect::<Vec<f64>>();
    let (x, dy, w) = (wide(&x), wide(&dy), wide(&w));
    let g = |i: usize| if weighted { w[i] } else { 1.0 };
    let (want, _) = rms_norm_backward_ref(norm, &x, weighted.then_some(&w[..]), &dy);
    let nf = n as f64;
    let mut c = Compare::default();
    for row in 0..n_rows {
        let (xr, dyr) = (&x[row * n..][..n], &dy[row * n..][..n]);
        let ss: f64 = xr.iter().map(|v| v * v).sum();
        let r = 1.0 / (ss / nf + 1e-6).sqrt();
        let s: f64 = (0..n).map(|i| (dyr[i] * g(i) * xr[i]).abs()).sum();
        for i in 0..n {
            let a = r * (dyr[i] * g(i)).abs();
            let b = xr[i].abs() * r * r * s / nf;
            let bound = (nf / 2.0 + 10.0) * U * a + (2.5 * nf + 32.0) * U * b + 1e-30;
            let at = row * n + i;
            c.add(f64::from(got[at]), want[at], bound, || {
                format!("n {n} rows {n_rows} weighted {weighted} row {row} elem {i}")
            });
        }
    }
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil;

    #[test]
    fn rms_norm_backward_matches_reference() {
        testutil::parity("rms_norm_backward", 6, 13);
    }

    /// The reference is the gradient of the forward's reference: central differences of
    /// `L = sum dy * rms_norm(x) * g` (f64, step 1e-5) against dx and dg, on 3 rows of 7 with
    /// and without a gain. The differences err by h^2/6 |L'''| plus eps |L| / h, both about
    /// 1e-10 at these sizes: the bound 1e-8 (1 + |ref|) leaves a factor of 10 and catches any
    /// missing term (the mean term alone is of order 0.1 here).
    #[test]
    fn reference_is_the_forward_gradient() {
        let norm = RmsNorm {
            n: 7,
            n_rows: 3,
            eps: 1e-6,
        };
        let wide = |v: Vec<f32>| v.into_iter().map(f64::from).collect::<Vec<f64>>();
        let x = wide(random_f32(21, 7));
        let dy = wide(random_f32(21, 8));
        let w = wide(random_f32(7, 9));
        for weight in [None, Some(&w[..])] {
            let loss = |x: &[f64], g: Option<&[f64]>| -> f64 {
                let y = norm.reference_f64(x, g);
                y.iter().zip(&dy).map(|(a, b)| a * b).sum()
            };
            let (dx, dg) = rms_norm_backward_ref(norm, &x, weight, &dy);
            let h = 1e-5;
            let close = |fd: f64, r: f64| (fd - r).abs() <= 1e-8 * (1.0 + r.abs());
            for i in 0..x.len() {
                let (mut xp, mut xm) = (x.clone(), x.clone());
                xp[i] += h;
                xm[i] -= h;
                let fd = (loss(&xp, weight) - loss(&xm, weight)) / (2.0 * h);
                assert!(close(fd, dx[i]), "dx {i}: fd {fd} ref {}", dx[i]);
            }
            if let Some(w) = weight {
                assert_eq!(dg.len(), w.len());
                for i in 0..w.len() {
                    let (mut wp, mut wm) = (w.to_vec(), w.to_vec());
                    wp[i] += h;
                    wm[i] -= h;
                    let fd = (loss(&x, Some(&wp)) - loss(&x, Some(&wm))) / (2.0 * h);
                    assert!(close(fd, dg[i]), "dg {i}: fd {fd} ref {}", dg[i]);
                }
            }
        }
    }

    /// Gemma's shapes: the 640-wide vector and per-head norms over [4, 256].
    #[test]
    fn gemma_shapes() {
        let Some(gpu) = testutil::gpu() else { return };
        for (n, rows, weighted) in [(640, 2, true), (256, 4, true), (256, 1, false)] {
            let c = compare(gpu, n, rows, weighted, n as u64).unwrap();
            assert!(c.max_ratio <= 1.0, "{}", c.worst);
        }
    }
}
