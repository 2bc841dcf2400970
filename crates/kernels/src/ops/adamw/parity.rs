//! AdamW's CPU references (the squared norm and the update), their hand-computed tests and
//! the parity checks of both kernels.

use super::*;
use crate::device::Gpu;
use crate::parity::data::{Rng, random_f32};
use crate::parity::{Check, Compare, U, run_read};
use crate::readback::Readback;
use crate::tensor::GpuTensor;

/// CPU reference, in f64: `sum_i g_i^2`, the squared global norm of the gradient.
pub fn grad_norm_sq_ref(g: &[f64]) -> f64 {
    g.iter().map(|x| x * x).sum()
}

/// CPU reference, in f64: one AdamW step over every element of `w` with gradient `g` and
/// moments `m`, `v` (updated in place), the gradient clipped by its squared global norm
/// `norm_sq` ([`AdamW::clip`]). In torch.optim.AdamW's order: `g *= clip`; `w *= 1 - lr wd`;
/// `m = b1 m + (1 - b1) g`; `v = b2 v + (1 - b2) g^2`; `w -= lr/bc1 * m / (sqrt(v)/sqrt(bc2) +
/// eps)` with `(bc1, bc2)` = [`AdamW::bias_corrections`]: `w -= lr (mhat / (sqrt(vhat) +
/// eps) + wd w_old)`, `mhat = m/bc1`, `vhat = v/bc2`. A `norm_sq` that is not finite changes
/// nothing ([`applies`]). The parameters are taken as they are ([`AdamW::check`] says which
/// the formulas need).
pub fn adamw_ref(p: &AdamW, w: &mut [f64], g: &[f64], m: &mut [f64], v: &mut [f64], norm_sq: f64) {
    if !applies(norm_sq) {
        return;
    }
    let clip = p.clip(norm_sq);
    let (bc1, bc2) = p.bias_corrections();
    for (((w, &g), m), v) in w.iter_mut().zip(g).zip(m.iter_mut()).zip(v.iter_mut()) {
        let g = g * clip;
        *w *= 1.0 - p.lr * p.weight_decay;
        *m = p.beta1 * *m + (1.0 - p.beta1) * g;
        *v = p.beta2 * *v + (1.0 - p.beta2) * g * g;
        *w -= p.lr / bc1 * *m / (v.sqrt() / bc2.sqrt() + p.eps);
    }
}

/// `n u / (1 - n u)`: the relative error of n roundings in a row.
fn gamma(n: f64) -> f64 {
    n * U / (1.0 - n * U)
}

/// The norm's bound: a sum of positive terms errs by at most `gamma(D)` of itself, D the most
/// roundings any term passes: its square, K = 16 additions in its invocation, 8 tree levels,
/// ceil(partials/256) additions in the second dispatch's invocation and 8 tree levels again.
fn norm_bound(n: usize, sum: f64) -> f64 {
    let partials = GradNormSq { n }.partials();
    let d = (16 + 8 + partials.div_ceil(WORKGROUP as usize) + 8 + 1) as f64;
    gamma(d) * sum
}

/// Tolerance of the squared norm: `gamma(D) sum g^2`, `D = 33 + ceil(n/4096/256)`: a sum of
/// positive terms errs by at most gamma of the most roundings one term passes (its square,
/// 16 additions in its invocation, 8 tree levels, its partial sum's additions in the second
/// dispatch and 8 more levels), whatever the order.
pub const NORM_CHECK: Check = Check {
    name: "grad_norm_sq",
    tolerance: "gamma(33 + ceil(n/2^20)) sum g^2",
    case: norm_case,
};

fn random_len(rng: &mut Rng) -> usize {
    if rng.bool() {
        rng.pick(&[1, 255, 256, 257, 4095, 4096, 4097, 70_001])
    } else {
        rng.range(1, 40_000)
    }
}

fn norm_case(gpu: &Gpu, rng: &mut Rng) -> Result<Compare, GpuError> {
    let n = random_len(rng);
    let scale = rng.pick(&[1e-3, 1.0, 40.0]);
    let g: Vec<f32> = random_f32(n, rng.next_u64())
        .iter()
        .map(|v| v * scale)
        .collect();
    let (got, _) = gpu_norm(gpu, &g, None)?;
    let want = grad_norm_sq_ref(&wide(&g));
    let mut c = Compare::default();
    c.add(f64::from(got), want, norm_bound(n, want), || {
        format!("n {n} scale {scale}")
    });
    Ok(c)
}

fn wide(v: &[f32]) -> Vec<f64> {
    v.iter().map(|&x| f64::from(x)).collect()
}

/// The GPU's squared norm of `g` (read from a gradient at offset 1 into a scratch at offset
/// 2), and the scratch's two words before it (which must stay as written); `grid` replaces
/// the first dispatch's grid.
fn gpu_norm(gpu: &Gpu, g: &[f32], grid: Option<[u32; 3]>) -> Result<(f32, [f32; 2]), GpuError> {
    let n = g.len();
    let norm = GradNormSq { n };
    let gt = GpuTensor::from_f32(gpu, &[n + 1], &[&[3.0], g].concat());
    let len = norm.scratch_len() + 2;
    let st = GpuTensor::from_f32(gpu, &[len], &vec![-1.0; len]);
    let [mut partials, total] = norm.ops(View::at(&gt, 1), View::at(&st, 2))?;
    if let Some(grid) = grid {
        partials.grid = grid;
    }
    let got: Vec<f32> = run_read(gpu, vec![partials, total], &st, 0, 3)?;
    Ok((got[2], [got[0], got[1]]))
}

/// The update's per-element bounds `(w, m, v)` (see [`CHECK`]).
fn update_bounds(p: &AdamW, w: f64, g: f64, m: f64, v: f64, norm_sq: f64) -> [f64; 3] {
    let clip = p.clip(norm_sq);
    let eps_c = if p.max_norm > 0.0 { 17.0 * U } else { 0.0 };
    let (bc1, bc2) = p.bias_corrections();
    let (b1, b2) = (p.beta1, p.beta2);
    let gc = g * clip;
    let eps_g = eps_c + U;
    let e_g = eps_g * gc.abs();
    let m1 = m + (1.0 - b1) * (gc - m);
    let e_m = (1.0 - b1) * (e_g + 3.0 * U * (gc - m).abs()) + U * m1.abs();
    let v1 = b2 * v + (1.0 - b2) * gc * gc;
    let e_v = 2.0 * U * b2 * v + (1.0 - b2) * gc * gc * (2.0 * eps_g + 3.0 * U) + U * v1;
    let sq = v1.sqrt();
    let e_sq = (e_v / (2.0 * sq)).min(e_v.sqrt()) + 9.0 * U * sq;
    let q = sq / bc2.sqrt();
    let e_q = e_sq / bc2.sqrt() + 6.0 * U * q;
    let denom = q + p.eps;
    let e_den = e_q + U * p.eps + U * denom;
    let r = m1 / denom;
    let e_r = e_m / denom + r.abs() * (e_den / denom + 5.0 * U);
    let step_size = p.lr / bc1;
    let e_upd = step_size * e_r + 2.0 * U * (step_size * r).abs();
    let w1 = w * (1.0 - p.lr * p.weight_decay);
    let w2 = w1 - step_size * r;
    let e_w = 2.0 * U * w1.abs() + e_upd + U * w2.abs();
    [1.01 * e_w, 1.01 * e_m, 1.01 * e_v]
}

/// Tolerance, per element (u = 2^-24; Vulkan's sqrt, as `1/inversesqrt`, errs by 4.5 ulp =
/// 9u, its division by 2.5 ulp = 5u; each f32 factor the host rounds adds u): the clip errs
/// by 17u (sqrt, the add, 1e-6 and max_norm rounded, the division), so g by `eps_g = 17u +
/// u`; `m1 = m + (1-b1)(g-m)`: `(1-b1)(eps_g |g| + 3u |g-m|) + u |m1|`; `v1 = b2 v + (1-b2)
/// g^2`: `2u b2 v + (1-b2) g^2 (2 eps_g + 3u) + u v1`; `sqrt(v1)`: `min(e_v / (2 sqrt v1),
/// sqrt e_v) + 9u sqrt v1`; over sqrt(bc2) 6u more, plus eps: u (eps + denom); `m1/denom`:
/// `e_m/denom + |r| (e_den/denom + 5u)`; times lr/bc1: 2u; `w (1 - lr wd)`: 2u |w1|; the
/// difference: u |w2|. The factor 1.01 covers second-order terms. The squared norm is the
/// GPU's own (read back), so this bound is the update's alone.
pub const CHECK: Check = Check {
    name: "adamw",
    tolerance: "w: 2u|w1| + (lr/bc1)(e_m/denom + |r|(e_den/denom + 5u)) + 2u|upd| + u|w2|; \
                m: (1-b1)(eps_g|g| + 3u|g-m|) + u|m1|; v: 2u b2 v + (1-b2)g^2(2eps_g+3u) + u v1",
    case: update_case,
};

/// Random AdamW inputs of length `n`: `(w, g, m, v)` with gradients of magnitude `scale`.
fn random_state(n: usize, scale: f32, seed: u64) -> [Vec<f32>; 4] {
    let w = random_f32(n, seed);
    let g: Vec<f32> = random_f32(n, seed ^ 1).iter().map(|x| x * scale).collect();
    let m: Vec<f32> = random_f32(n, seed ^ 2)
        .iter()
        .map(|x| x * scale * 0.3)
        .collect();
    let v: Vec<f32> = random_f32(n, seed ^ 3)
        .iter()
        .map(|x| x.abs() * scale * scale * 0.5)
        .collect();
    [w, g, m, v]
}

fn update_case(gpu: &Gpu, rng: &mut Rng) -> Result<Compare, GpuError> {
    let n = random_len(rng);
    let scale = rng.pick(&[1e-3, 1.0, 30.0]);
    let state = random_state(n, scale, rng.next_u64());
    let norm = grad_norm_sq_ref(&wide(&state[1])).sqrt();
    let late = rng.range(1, 5000) as u32;
    let p = AdamW {
        lr: rng.pick(&[1e-4, 2e-3, 0.1]),
        beta1: rng.pick(&[0.9, 0.8]),
        beta2: rng.pick(&[0.999, 0.95]),
        eps: rng.pick(&[1e-8, 1e-6]),
        weight_decay: rng.pick(&[0.0, 0.01, 0.1]),
        max_norm: rng.pick(&[0.0, 0.5, 2.0]) * norm,
        step: rng.pick(&[1, 2, 10, late]),
    };
    compare_update(gpu, &p, &state, None)
}

/// What [`run_update`] reads back: `w`, `m` and `v` with the words before each (1, 3 and 0
/// of them, set to 9), and the squared norm the GPU computed.
struct Updated {
    w: Vec<f32>,
    m: Vec<f32>,
    v: Vec<f32>,
    norm_sq: f32,
}

/// Runs the norm and the update in one step over `state` (each tensor at its own offset, the
/// words before it set to 9); `grid` replaces the update's grid.
fn run_update(
    gpu: &Gpu,
    p: &AdamW,
    state: &[Vec<f32>; 4],
    grid: Option<[u32; 3]>,
) -> Result<Updated, GpuError> {
    let [w, g, m, v] = state;
    let n = w.len();
    let pad = |v: &[f32], k: usize| [&vec![9.0; k][..], v].concat();
    let wt = GpuTensor::from_f32(gpu, &[n + 1], &pad(w, 1));
    let gt = GpuTensor::from_f32(gpu, &[n + 2], &pad(g, 2));
    let mt = GpuTensor::from_f32(gpu, &[n + 3], &pad(m, 3));
    let vt = GpuTensor::from_f32(gpu, &[n], v);
    let norm = GradNormSq { n };
    let st = GpuTensor::from_f32(
        gpu,
        &[norm.scratch_len() + 1],
        &vec![0.0; norm.scratch_len() + 1],
    );
    let [a, b] = norm.ops(View::at(&gt, 2), View::at(&st, 1))?;
    let s = View::at(&st, 1);
    let mut update = p.op(
        n,
        View::at(&wt, 1),
        View::at(&gt, 2),
        View::at(&mt, 3),
        (&vt).into(),
        s,
    )?;
    if let Some(grid) = grid {
        update.grid = grid;
    }
    let w: Vec<f32> = run_read(gpu, vec![a, b, update], &wt, 0, n + 1)?;
    let read = |t: &GpuTensor, len: usize| -> Result<Vec<f32>, GpuError> {
        let mut out = vec![0f32; len];
        Readback::new(gpu, (len * 4) as u64).read(gpu, t, 0, &mut out)?;
        Ok(out)
    };
    Ok(Updated {
        w,
        m: read(&mt, n + 3)?,
        v: read(&vt, n)?,
        norm_sq: read(&st, 2)?[1],
    })
}

/// Runs [`run_update`] and compares w, m and v with [`adamw_ref`] given the norm the GPU
/// computed.
fn compare_update(
    gpu: &Gpu,
    p: &AdamW,
    state: &[Vec<f32>; 4],
    grid: Option<[u32; 3]>,
) -> Result<Compare, GpuError> {
    let [w, g, m, v] = state;
    let n = w.len();
    let got = run_update(gpu, p, state, grid)?;
    let norm_sq = f64::from(got.norm_sq);
    let (mut rw, rg, mut rm, mut rv) = (wide(w), wide(g), wide(m), wide(v));
    adamw_ref(p, &mut rw, &rg, &mut rm, &mut rv, norm_sq);
    let mut c = Compare::default();
    c.exact(f64::from(got.w[0]), 9.0, || "the word before w".into());
    for (k, &x) in got.m[..3].iter().enumerate() {
        c.exact(f64::from(x), 9.0, || format!("m word {k}"));
    }
    let at = |what: &str, i: usize| format!("{what} n {n} elem {i} {p:?} norm_sq {norm_sq:e}");
    for i in 0..n {
        let (wi, mi, vi) = (f64::from(w[i]), f64::from(m[i]), f64::from(v[i]));
        let [bw, bm, bv] = update_bounds(p, wi, rg[i], mi, vi, norm_sq);
        c.add(f64::from(got.w[1 + i]), rw[i], bw, || at("w", i));
        c.add(f64::from(got.m[3 + i]), rm[i], bm, || at("m", i));
        c.add(f64::from(got.v[i]), rv[i], bv, || at("v", i));
    }
    Ok(c)
}

/// Tolerance: none. A gradient holding a NaN, an infinity or a value whose square overflows
/// f32 makes the squared norm not finite, and the update then leaves every word of w, m and
/// v with the bits it had (compared as bits: a NaN written would fail, and so would -0 for 0),
/// with and without clipping; the norm read back must itself be not finite, so the case
/// checks the skip and not an update that happened to change nothing.
pub const NONFINITE_CHECK: Check = Check {
    name: "adamw_nonfinite",
    tolerance: "exact: w, m, v keep their bits where norm_sq is NaN or inf",
    case: nonfinite_case,
};

fn nonfinite_case(gpu: &Gpu, rng: &mut Rng) -> Result<Compare, GpuError> {
    let n = random_len(rng);
    let mut state = random_state(n, rng.pick(&[1e-3, 1.0]), rng.next_u64());
    // 3e19 squared is 9e38, past f32's largest 3.4e38: finite, yet the norm overflows.
    let bad = rng.pick(&[f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 3e19]);
    let at = rng.range(0, n);
    state[1][at] = bad;
    let p = AdamW {
        lr: rng.pick(&[1e-4, 0.1]),
        beta1: 0.9,
        beta2: 0.999,
        eps: 1e-8,
        weight_decay: rng.pick(&[0.0, 0.1]),
        max_norm: rng.pick(&[0.0, 1.0]),
        step: rng.pick(&[1, 7]),
    };
    let got = run_update(gpu, &p, &state, None)?;
    let mut c = Compare::default();
    let norm_sq = got.norm_sq;
    c.exact(f64::from(u8::from(norm_sq.is_finite())), 0.0, || {
        format!("n {n}: gradient {bad:e} at {at} gave a finite norm_sq {norm_sq:e}")
    });
    let bits = |x: f32| f64::from(x.to_bits());
    let [w, _, m, v] = &state;
    let nine = [9.0f32; 3];
    let kept = [
        ("w", [&nine[..1], w].concat(), &got.w),
        ("m", [&nine[..], m].concat(), &got.m),
        ("v", v.clone(), &got.v),
    ];
    for (what, was, now) in &kept {
        for (i, (&x, &y)) in now.iter().zip(was).enumerate() {
            c.exact(bits(x), bits(y), || {
                format!(
                    "{what} word {i}: {x:e}, was {y:e} (n {n}, gradient {bad:e} at {at}, {p:?})"
                )
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
    fn grad_norm_sq_matches_reference() {
        testutil::parity("grad_norm_sq", 8, 41);
    }

    #[test]
    fn adamw_matches_reference() {
        testutil::parity("adamw", 8, 43);
    }

    #[test]
    fn adamw_skips_a_gradient_that_is_not_finite() {
        testutil::parity("adamw_nonfinite", 8, 47);
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-15 * (1.0 + b.abs())
    }

    /// One step by hand: w = 1, g = 0.5, m = v = 0, t = 1, lr 0.1, wd 0.01: m = 0.05,
    /// v = 0.00025, mhat = 0.5, vhat = 0.25, so w = 1 (1 - 0.001) - 0.1 * 0.5 / (0.5 + 1e-8).
    /// Then clipped: norm_sq 4 (norm 2) and max_norm 1 make g = 0.5 / (2 + 1e-6).
    #[test]
    fn reference_by_hand() {
        let mut p = AdamW {
            lr: 0.1,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            weight_decay: 0.01,
            max_norm: 0.0,
            step: 1,
        };
        let (mut w, mut m, mut v) = ([1.0], [0.0], [0.0]);
        adamw_ref(&p, &mut w, &[0.5], &mut m, &mut v, 4.0);
        assert!(close(m[0], 0.05) && close(v[0], 0.00025), "{m:?} {v:?}");
        assert!(close(w[0], 0.999 - 0.1 * 0.5 / (0.5 + 1e-8)), "{w:?}");
        p.max_norm = 1.0;
        let (mut w, mut m, mut v) = ([1.0], [0.0], [0.0]);
        adamw_ref(&p, &mut w, &[0.5], &mut m, &mut v, 4.0);
        let g = 0.5 / (2.0 + 1e-6);
        assert!(close(m[0], 0.1 * g) && close(v[0], 0.001 * g * g));
        // mhat = g, vhat = g^2: the step is lr g / (|g| + eps) whatever the clip.
        assert!(close(w[0], 0.999 - 0.1 * g / (g + 1e-8)), "{w:?}");
        assert!(close(p.clip(0.25), 1.0) && close(p.clip(4.0), 1.0 / (2.0 + 1e-6)));
    }

    /// A squared norm that is NaN or infinite changes nothing in the reference, with and
    /// without clipping; a finite one, however large, is applied.
    #[test]
    fn reference_skips_a_norm_that_is_not_finite() {
        for max_norm in [0.0, 1.0] {
            let p = AdamW {
                lr: 0.1,
                beta1: 0.9,
                beta2: 0.999,
                eps: 1e-8,
                weight_decay: 0.01,
                max_norm,
                step: 3,
            };
            for norm_sq in [f64::NAN, f64::INFINITY] {
                let (mut w, mut m, mut v) = ([1.0, -2.0], [0.1, 0.2], [0.01, 0.02]);
                adamw_ref(&p, &mut w, &[f64::NAN, 0.5], &mut m, &mut v, norm_sq);
                assert_eq!((w, m, v), ([1.0, -2.0], [0.1, 0.2], [0.01, 0.02]));
                assert!(!applies(norm_sq));
            }
            let (mut w, mut m, mut v) = ([1.0], [0.1], [0.01]);
            adamw_ref(&p, &mut w, &[1e200], &mut m, &mut v, f64::MAX);
            assert!(applies(f64::MAX) && w[0] != 1.0 && m[0] != 0.1 && v[0] != 0.01);
        }
    }

    /// Three steps of the reference against torch.optim.AdamW's documented algorithm written
    /// out literally (theta <- theta - lr lambda theta; m <- b1 m + (1 - b1) g; v <- b2 v +
    /// (1 - b2) g^2; mhat = m / (1 - b1^t); vhat = v / (1 - b2^t); theta <- theta - lr mhat /
    /// (sqrt(vhat) + eps)) on a few values, gradients changing each step.
    #[test]
    fn reference_is_torchs_formula() {
        let mut p = AdamW {
            lr: 1e-2,
            beta1: 0.9,
            beta2: 0.95,
            eps: 1e-6,
            weight_decay: 0.1,
            max_norm: 0.0,
            step: 0,
        };
        let mut w = vec![0.5, -1.5, 2.0, 0.0];
        let (mut m, mut v) = (vec![0.0; 4], vec![0.0; 4]);
        let (mut tw, mut tm, mut tv) = (w.clone(), m.clone(), v.clone());
        for t in 1..=3 {
            p.step = t;
            let g: Vec<f64> = (0..4)
                .map(|i| (i as f64 - 1.5) * f64::from(t) * 0.3)
                .collect();
            adamw_ref(&p, &mut w, &g, &mut m, &mut v, grad_norm_sq_ref(&g));
            for i in 0..4 {
                tw[i] -= p.lr * p.weight_decay * tw[i];
                tm[i] = p.beta1 * tm[i] + (1.0 - p.beta1) * g[i];
                tv[i] = p.beta2 * tv[i] + (1.0 - p.beta2) * g[i] * g[i];
                let mhat = tm[i] / (1.0 - p.beta1.powi(t as i32));
                let vhat = tv[i] / (1.0 - p.beta2.powi(t as i32));
                tw[i] -= p.lr * mhat / (vhat.sqrt() + p.eps);
                assert!(
                    close(w[i], tw[i]) && close(m[i], tm[i]) && close(v[i], tv[i]),
                    "t {t} i {i}"
                );
            }
        }
        assert!(AdamW { step: 0, ..p }.check().is_err());
        assert!(
            AdamW {
                beta2: 1.0,
                step: 1,
                ..p
            }
            .check()
            .is_err()
        );
    }

    /// The norm is the same bits on every run (a fixed order of additions), a zero-length
    /// gradient gives 0, and the words around the output stay.
    #[test]
    fn norm_is_deterministic() {
        let Some(gpu) = testutil::gpu() else { return };
        let g = random_f32(20_000, 3);
        let (a, around) = gpu_norm(gpu, &g, None).unwrap();
        let (b, _) = gpu_norm(gpu, &g, None).unwrap();
        assert_eq!(a.to_bits(), b.to_bits());
        assert_eq!(around, [-1.0, -1.0]);
        assert_eq!(gpu_norm(gpu, &[], None).unwrap().0, 0.0);
    }

    /// The kernels read their linear workgroup index from a 2-D grid, as `grid_1d` lays out
    /// more than 65,535 workgroups: here a small length's grids replaced by 2-D ones that
    /// cover more workgroups than there is work.
    #[test]
    fn two_dimensional_grids() {
        let Some(gpu) = testutil::gpu() else { return };
        let g = random_f32(3 * 4096 + 5, 4);
        let (got, _) = gpu_norm(gpu, &g, Some([3, 2, 1])).unwrap();
        let want = grad_norm_sq_ref(&wide(&g));
        assert!(
            (f64::from(got) - want).abs() <= norm_bound(g.len(), want),
            "{got} {want}"
        );
        let p = AdamW {
            lr: 1e-3,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            weight_decay: 0.01,
            max_norm: 1.0,
            step: 3,
        };
        let state = random_state(1000, 1.0, 5);
        let c = compare_update(gpu, &p, &state, Some([3, 2, 1])).unwrap();
        assert!(c.max_ratio <= 1.0, "{}", c.worst);
    }

    /// A length above 65,535 workgroups of 256, so the update's grid from `grid_1d` is 2-D.
    #[test]
    fn length_past_one_grid_dimension() {
        let Some(gpu) = testutil::gpu() else { return };
        let n: usize = 65_535 * 256 + 300;
        assert!(grid_1d(n.div_ceil(256))[1] > 1);
        let p = AdamW {
            lr: 2e-4,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            weight_decay: 0.0,
            max_norm: 1.0,
            step: 7,
        };
        let state = random_state(n, 0.01, 6);
        let c = compare_update(gpu, &p, &state, None).unwrap();
        assert!(c.max_ratio <= 1.0, "{}", c.worst);
    }
}
