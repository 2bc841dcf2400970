//! The cross-entropy's CPU reference, its finite-difference test and its parity check.

use super::*;
use crate::device::Gpu;
use crate::parity::data::{Rng, random_f32};
use crate::parity::{Check, Compare, U, run_read};
use crate::readback::Readback;
use crate::tensor::GpuTensor;

/// `(z, dz/dx)` of a raw logit under soft-cap `c` (none where `c` is 0).
fn capped(x: f64, c: f64) -> (f64, f64) {
    if c > 0.0 {
        let t = (x / c).tanh();
        (c * t, 1.0 - t * t)
    } else {
        (x, 1.0)
    }
}

/// CPU reference, in f64: `(loss, dlogits)` over `p.n` rows of `p.vocab` logits. With `z = c
/// tanh(x / c)` (`c = p.softcap`; `z = x` where it is 0) and `t` the row's target:
/// `loss = lse(z) - z_t = log(sum_j exp(z_j)) - z_t` and `dlogits_i = w (softmax(z)_i -
/// [i == t]) dz_i/dx_i` with `dz/dx = 1 - tanh^2(x / c)` (1 without a cap) and `w = p.weight`:
/// the gradient of `w * sum(loss)`. A row whose target is `>= vocab` ([`MASKED`]) has a loss
/// of 0 and a zero gradient.
pub fn cross_entropy_ref(
    p: &CrossEntropy,
    logits: &[f64],
    targets: &[u32],
) -> (Vec<f64>, Vec<f64>) {
    let (v, c, w) = (p.vocab, f64::from(p.softcap), f64::from(p.weight));
    let mut loss = Vec::with_capacity(p.n);
    let mut dlogits = vec![0.0; p.n * v];
    let rows = logits
        .chunks_exact(v)
        .zip(targets)
        .zip(dlogits.chunks_exact_mut(v));
    for ((x, &t), d) in rows.take(p.n) {
        let t = t as usize;
        if t >= v {
            loss.push(0.0);
            continue;
        }
        let (zd, lse) = capped_lse(x, c);
        loss.push(lse - zd[t].0);
        for (i, (di, &(z, dz))) in d.iter_mut().zip(&zd).enumerate() {
            let hot = if i == t { 1.0 } else { 0.0 };
            *di = w * ((z - lse).exp() - hot) * dz;
        }
    }
    (loss, dlogits)
}

/// The losses of [`cross_entropy_ref`] alone (the same arithmetic), without the
/// `[n × vocab]` gradient: evaluation.
pub fn cross_entropy_loss_ref(p: &CrossEntropy, logits: &[f64], targets: &[u32]) -> Vec<f64> {
    let (v, c) = (p.vocab, f64::from(p.softcap));
    let rows = logits.chunks_exact(v).zip(targets).take(p.n);
    rows.map(|(x, &t)| {
        let t = t as usize;
        if t >= v {
            return 0.0;
        }
        let (zd, lse) = capped_lse(x, c);
        lse - zd[t].0
    })
    .collect()
}

/// A row's capped logits with their derivatives, and their log-sum-exp.
fn capped_lse(x: &[f64], c: f64) -> (Vec<(f64, f64)>, f64) {
    let zd: Vec<(f64, f64)> = x.iter().map(|&x| capped(x, c)).collect();
    let m = zd.iter().map(|z| z.0).fold(f64::NEG_INFINITY, f64::max);
    let lse = m + zd.iter().map(|z| (z.0 - m).exp()).sum::<f64>().ln();
    (zd, lse)
}

/// The smallest normal f32: a result of exp below it may be flushed to 0.
const TINY: f64 = 1.0 / (1u64 << 63) as f64 / (1u64 << 63) as f64;

/// Per-row bounds: `(loss bound, one bound per logit's gradient)`, for a row of f32 logits
/// `x` with target `t < vocab` (see [`CHECK`]).
fn row_bounds(x: &[f64], t: usize, c: f64, w: f64) -> (f64, Vec<f64>) {
    let v = x.len() as f64;
    // Per logit: z, dz/dx, the GPU's error on tanh (the soft-cap kernel's bound over c) and on
    // z and dz/dx.
    let rows: Vec<_> = x
        .iter()
        .map(|&x| {
            let (z, dz) = capped(x, c);
            if c > 0.0 {
                let e_th = 4.0 * (3.0 + 2.0 * (x / c).abs()) * 2.0 * U + 4.0 * U;
                let th = z / c;
                (z, dz, c * e_th, (2.0 * th.abs() + e_th) * e_th + 2.0 * U)
            } else {
                (z, dz, 0.0, 0.0)
            }
        })
        .collect();
    let e_max = rows.iter().map(|r| r.2).fold(0.0, f64::max);
    let m = rows.iter().map(|r| r.0).fold(f64::NEG_INFINITY, f64::max);
    let s: f64 = rows.iter().map(|r| (r.0 - m).exp()).sum();
    let lse = m + s.ln();
    // E: the softmax-weighted distance below the max, the exps' arguments summed along a
    // term's chain of rescalings.
    let e: f64 = rows.iter().map(|r| (r.0 - lse).exp() * (m - r.0)).sum();
    let a = (x.len().div_ceil(WORKGROUP as usize) + 8) as f64;
    let eps_s = (8.0 * a + 6.0) * U + 5.0 * U * (e + 2.0 * e_max) + v * TINY;
    let e_lse = e_max + 1.01 * eps_s + 8.0 * U + 6.0 * U * s.ln() + U * lse.abs();
    let loss = lse - rows[t].0;
    let loss_bound = 1.01 * (e_lse + rows[t].2 + U * loss.abs());
    let grads = rows
        .iter()
        .enumerate()
        .map(|(i, &(z, dz, e_z, e_dz))| {
            let arg = z - lse;
            let delta = e_z + e_lse + U * arg.abs();
            let eps_p = delta.exp_m1() + delta.exp() * (3.0 + 2.0 * (arg.abs() + delta)) * 2.0 * U;
            let p = arg.exp();
            let e_p = p * eps_p + TINY;
            let d = if i == t { p - 1.0 } else { p };
            let e_d = e_p + U * (d.abs() + e_p);
            // The products by w and dz/dx may each land below 2^-126 and be flushed to 0
            // (WGSL lets any f32 operation flush a subnormal result): at most TINY, since
            // |w|, dz/dx <= 1 here.
            let e_g = w.abs() * (e_d * dz + d.abs() * e_dz + e_d * e_dz)
                + 2.0 * U * w.abs() * (d.abs() + e_d) * (dz + e_dz)
                + TINY;
            1.01 * e_g
        })
        .collect();
    (loss_bound, grads)
}

/// Tolerance, per row (u = 2^-24; "ulp" as Vulkan's, at most 2u relative). z: the soft-cap's
/// tanh errs as the soft-cap kernel's, `e_th = 4 (3 + 2|x/c|) 2u + 4u` (so `e_z = c e_th`,
/// `dz/dx = 1 - th^2` errs by `(2|th| + e_th) e_th + 2u`); without a cap z is x, exactly. The
/// sum s of exp(z - m): each term passes at most `A = ceil(V/256) + 8` rescalings (its
/// invocation's loop, then the 8 levels of the tree) and adds; each exp errs `(3 + 2|y|)`
/// ulp plus its argument's rounding u|y|, and a term's arguments along its chain add up to
/// `m - z_j`: weighted by the softmax, s errs by `(8A + 6) u + 5u (E + 2 e_max)`, E = sum_j
/// p_j (m - z_j) (plus V flushed exps below 2^-126). lse = m + log s then errs by
/// `e_max + eps_s + 2^-21 + 6u ln s + u |lse|` (log: 2^-21 absolute on [0.5, 2], else 3 ulp;
/// a shift of each z by at most e_max shifts lse by at most e_max). loss: `e_lse + e_z(t) +
/// u |loss|`. Gradient: `exp(z_i - lse)` errs relatively by `expm1(d) + e^d (3 + 2(|a| + d))
/// 2u`, `d = e_z(i) + e_lse + u |a|`, a = z_i - lse (plus 2^-126 flushed); the one-hot
/// subtraction adds u, and the products by dz/dx and w add dz/dx's error and 2u (plus 2^-126:
/// a subnormal product may be flushed). The factor
/// 1.01 covers second-order terms (products of two of these errors, each below 1e-3).
pub const CHECK: Check = Check {
    name: "cross_entropy",
    tolerance: "loss: e_lse + e_z(t) + u|loss|; grad: |w| (p eps_p + u|d|) dz + |w d| e_dz + 2u |g| + 2^-126; \
                eps_s = (8A+6)u + 5u E, A = ceil(V/256)+8",
    case: parity_case,
};

fn parity_case(gpu: &Gpu, rng: &mut Rng) -> Result<Compare, GpuError> {
    let vocab = match rng.range(0, 3) {
        0 => rng.pick(&[1, 7, 255, 256, 257, 1000, 2049]),
        1 => rng.range(1, 3000),
        // A multiple of 4: with an aligned offset, the vec4 kernel.
        _ => 4 * rng.range(1, 750),
    };
    let n = rng.range(1, 6);
    let scale = rng.pick(&[1.0, 4.0, 16.0, 60.0]);
    let softcap = rng.pick(&[0.0, 0.0, 30.0, 10.0]);
    let targets = (0..n)
        .map(|_| match rng.range(0, 8) {
            0 => MASKED,
            1 => (vocab + rng.range(0, 3)) as u32,
            _ => rng.range(0, vocab) as u32,
        })
        .collect::<Vec<_>>();
    let weight = 1.0 / rng.range(1, 100) as f32;
    let p = CrossEntropy {
        n,
        vocab,
        softcap,
        weight,
    };
    // Logits from word 3 (the scalar kernel) or 4 (the vec4 one where vocab allows).
    let lead = rng.range(3, 5);
    compare(gpu, p, scale, &targets, lead, rng.next_u64())
}

fn compare(
    gpu: &Gpu,
    p: CrossEntropy,
    scale: f32,
    targets: &[u32],
    lead: usize,
    seed: u64,
) -> Result<Compare, GpuError> {
    let len = p.n * p.vocab;
    let x: Vec<f32> = random_f32(len, seed).iter().map(|v| v * scale).collect();
    let xt = GpuTensor::from_f32(gpu, &[len + lead], &[&vec![7.0; lead][..], &x[..]].concat());
    let tt = GpuTensor::from_u32(gpu, &[p.n + 1], &[&[0], targets].concat());
    let lt = GpuTensor::from_f32(gpu, &[p.n + 2], &vec![5.0; p.n + 2]);
    let op = p.op(View::at(&xt, lead), View::at(&tt, 1), View::at(&lt, 2))?;
    let got: Vec<f32> = run_read(gpu, vec![op], &xt, 0, len + lead)?;
    let mut got_loss = vec![0f32; p.n + 2];
    Readback::new(gpu, lt.bytes()).read(gpu, &lt, 0, &mut got_loss)?;
    let wide: Vec<f64> = x.iter().map(|&v| f64::from(v)).collect();
    let (loss, grad) = cross_entropy_ref(&p, &wide, targets);
    let (c, w) = (f64::from(p.softcap), f64::from(p.weight));
    let v = p.vocab;
    let at = |what: &str, row: usize| {
        format!(
            "{what}: n {} vocab {v} cap {c} scale {scale} row {row} target {}",
            p.n, targets[row]
        )
    };
    let mut cmp = Compare::default();
    // The words around the views are untouched.
    for (i, &g) in got[..lead].iter().enumerate() {
        cmp.exact(f64::from(g), 7.0, || format!("logits word {i}"));
    }
    for i in [0, 1] {
        cmp.exact(f64::from(got_loss[i]), 5.0, || format!("loss word {i}"));
    }
    for row in 0..p.n {
        let t = targets[row] as usize;
        let gr = &got[lead + row * v..][..v];
        if t >= v {
            cmp.exact(f64::from(got_loss[2 + row]), 0.0, || at("masked loss", row));
            for (i, &g) in gr.iter().enumerate() {
                cmp.exact(f64::from(g), 0.0, || {
                    format!("{} elem {i}", at("masked", row))
                });
            }
            continue;
        }
        let (lb, gb) = row_bounds(&wide[row * v..][..v], t, c, w);
        cmp.add(f64::from(got_loss[2 + row]), loss[row], lb, || {
            at("loss", row)
        });
        for i in 0..v {
            cmp.add(f64::from(gr[i]), grad[row * v + i], gb[i], || {
                format!("{} elem {i}", at("grad", row))
            });
        }
    }
    Ok(cmp)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cross_entropy_matches_reference() {
        crate::testutil::parity("cross_entropy", 8, 29);
    }

    /// The reference's gradient is the gradient of `w * sum(loss)`: central differences
    /// (f64, step 1e-5) on 3 rows of 9 logits, one masked, with and without a soft-cap. The
    /// differences err by h^2/6 |L'''| plus eps |L| / h, about 1e-10 here: the bound
    /// 1e-8 (1 + |ref|) leaves a factor of 10 and catches any missing factor (the soft-cap's
    /// derivative moves these gradients by over 1e-3, the weight by a factor 3).
    #[test]
    fn reference_is_the_loss_gradient() {
        let targets = [4, MASKED, 0];
        let x: Vec<f64> = random_f32(27, 11)
            .iter()
            .map(|&v| f64::from(v) * 6.0)
            .collect();
        for softcap in [0.0, 5.0] {
            let p = CrossEntropy {
                n: 3,
                vocab: 9,
                softcap,
                weight: 1.0 / 3.0,
            };
            let objective = |x: &[f64]| -> f64 {
                let (loss, _) = cross_entropy_ref(&p, x, &targets);
                f64::from(p.weight) * loss.iter().sum::<f64>()
            };
            let (loss, grad) = cross_entropy_ref(&p, &x, &targets);
            assert_eq!(loss[1], 0.0);
            assert!(loss[0] > 0.0 && loss[2] > 0.0);
            let h = 1e-5;
            for i in 0..x.len() {
                let (mut xp, mut xm) = (x.clone(), x.clone());
                xp[i] += h;
                xm[i] -= h;
                let fd = (objective(&xp) - objective(&xm)) / (2.0 * h);
                let close = (fd - grad[i]).abs() <= 1e-8 * (1.0 + grad[i].abs());
                assert!(close, "cap {softcap} logit {i}: fd {fd} ref {}", grad[i]);
            }
            assert!(grad[9..18].iter().all(|&g| g == 0.0), "the masked row");
        }
    }

    /// The loss of a hand-computed row: logits (0, ln 3) with target 1 give softmax (1/4,
    /// 3/4), so loss = ln(4/3) and the gradient w (1/4, -1/4); capped at 2, z = 2 tanh(x/2).
    #[test]
    fn reference_by_hand() {
        let x = [0.0, 3f64.ln()];
        let p = CrossEntropy {
            n: 1,
            vocab: 2,
            softcap: 0.0,
            weight: 0.5,
        };
        let (loss, grad) = cross_entropy_ref(&p, &x, &[1]);
        assert!((loss[0] - (4.0f64 / 3.0).ln()).abs() < 1e-15);
        assert!((grad[0] - 0.125).abs() < 1e-15 && (grad[1] + 0.125).abs() < 1e-15);
        let capped = CrossEntropy { softcap: 2.0, ..p };
        let (loss, grad) = cross_entropy_ref(&capped, &x, &[1]);
        let z1 = 2.0 * (x[1] / 2.0).tanh();
        let p1 = z1.exp() / (1.0 + z1.exp());
        assert!((loss[0] - (-p1.ln())).abs() < 1e-15);
        let dz1 = 1.0 - (x[1] / 2.0).tanh().powi(2);
        assert!((grad[1] - 0.5 * (p1 - 1.0) * dz1).abs() < 1e-15);
        assert!((grad[0] - 0.5 * (1.0 - p1)).abs() < 1e-15);
    }

    /// Masked rows, a vocabulary that is no multiple of the workgroup (one longer than four
    /// of them), with and without the soft-cap, logits wide enough that exps underflow.
    #[test]
    fn masked_rows_and_ragged_vocab() {
        let Some(gpu) = crate::testutil::gpu() else {
            return;
        };
        for softcap in [0.0, 30.0] {
            let p = CrossEntropy {
                n: 4,
                vocab: 1025,
                softcap,
                weight: 0.25,
            };
            let targets = [MASKED, 1024, 3, MASKED];
            let c = compare(gpu, p, 60.0, &targets, 3, 5).unwrap();
            assert!(c.max_ratio <= 1.0, "{}", c.worst);
        }
    }

    /// Gemma's vocabulary, 262,144 logits a row (1,024 an invocation), capped and not, on
    /// both kernels (rows from word 3: one f32 a load; from word 4: vec4s).
    #[test]
    fn gemma_vocabulary() {
        let Some(gpu) = crate::testutil::gpu() else {
            return;
        };
        for softcap in [0.0, 30.0] {
            let p = CrossEntropy {
                n: 2,
                vocab: 262_144,
                softcap,
                weight: 0.5,
            };
            for lead in [3, 4] {
                let c = compare(gpu, p, 20.0, &[262_143, 17], lead, 8).unwrap();
                assert!(c.max_ratio <= 1.0, "{}", c.worst);
            }
        }
    }

    /// Parameters and views the kernel cannot take are errors, not dispatches.
    #[test]
    fn bad_input_is_an_error() {
        let Some(gpu) = crate::testutil::gpu() else {
            return;
        };
        let x = GpuTensor::from_f32(gpu, &[16], &[0.0; 16]);
        let t = GpuTensor::from_u32(gpu, &[2], &[0, 1]);
        let l = GpuTensor::from_f32(gpu, &[2], &[0.0; 2]);
        let p = CrossEntropy {
            n: 2,
            vocab: 4,
            softcap: 0.0,
            weight: 1.0,
        };
        let run = |p: CrossEntropy, x: View<'_>| p.op(x, (&t).into(), (&l).into());
        assert!(run(p, (&x).into()).is_ok());
        assert!(run(p, View::at(&x, 9)).is_err(), "logits short by one");
        assert!(
            run(CrossEntropy { n: 3, ..p }, (&x).into()).is_err(),
            "targets short"
        );
        assert!(run(CrossEntropy { vocab: 0, ..p }, (&x).into()).is_err());
        assert!(run(CrossEntropy { softcap: -1.0, ..p }, (&x).into()).is_err());
        assert!(
            run(
                CrossEntropy {
                    weight: f32::NAN,
                    ..p
                },
                (&x).into()
            )
            .is_err()
        );
    }
}
