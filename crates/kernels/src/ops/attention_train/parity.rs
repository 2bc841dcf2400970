//! The training attention forward's CPU reference, its error bound and its parity check; the
//! random cases and score bounds the backward's check shares.

use std::ops::Range;

use super::*;
use crate::device::Gpu;
use crate::ops::attention_train_coop::parity::{coop_score_bound, coop_weights_bound};
use crate::ops::matmul_coop::f16_err;
use crate::ops::unary::{self, UnaryOp};
use crate::parity::data::{Rng, random_f32};
use crate::parity::{Check, Compare, U, run_read};
use crate::tensor::{Dtype, GpuTensor};

impl TrainAttention {
    /// The key rows row i sees: `max(start[i], i + 1 - window) ..= i`.
    pub(crate) fn keys(&self, start: &[u32], i: usize) -> Range<usize> {
        let mut lo = start[i] as usize;
        if self.window > 0 {
            lo = lo.max((i + 1).saturating_sub(self.window));
        }
        lo..i + 1
    }

    /// `(s, cap')` for query row i, head h and key row j: `s = cap(scale q . k)` and the
    /// cap's derivative at `scale q . k` (1 without a cap).
    pub(crate) fn score(&self, q: &[f64], k: &[f64], i: usize, h: usize, j: usize) -> (f64, f64) {
        let raw = f64::from(self.scale) * dot(self.q_row(q, i, h), self.k_row(k, j, h));
        let c = f64::from(self.softcap);
        if c > 0.0 {
            let t = (raw / c).tanh();
            (c * t, 1.0 - t * t)
        } else {
            (raw, 1.0)
        }
    }

    /// The kv head of query head h.
    pub(crate) fn kv_head(&self, h: usize) -> usize {
        h / (self.n_head / self.n_kv)
    }

    /// Row i's head h of q (or of any `[n, n_head * dk]` tensor).
    pub(crate) fn q_row<'a>(&self, q: &'a [f64], i: usize, h: usize) -> &'a [f64] {
        &q[(i * self.n_head + h) * self.dk..][..self.dk]
    }

    /// Key row j's head for query head h.
    pub(crate) fn k_row<'a>(&self, k: &'a [f64], j: usize, h: usize) -> &'a [f64] {
        &k[(j * self.n_kv + self.kv_head(h)) * self.dk..][..self.dk]
    }

    /// Value row j's head for query head h.
    pub(crate) fn v_row<'a>(&self, v: &'a [f64], j: usize, h: usize) -> &'a [f64] {
        &v[(j * self.n_kv + self.kv_head(h)) * self.dv..][..self.dv]
    }

    /// Row i's head h of o (or of any `[n, n_head * dv]` tensor).
    pub(crate) fn o_row<'a>(&self, o: &'a [f64], i: usize, h: usize) -> &'a [f64] {
        &o[(i * self.n_head + h) * self.dv..][..self.dv]
    }
}

pub(crate) fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// CPU reference, in f64: `(o, lse)` of the training attention (the module docs' maths:
/// `s_ij = cap(scale q_i . k_j)` over the keys row i sees, `lse_i = log sum_j exp(s_ij)`,
/// `o_i = sum_j exp(s_ij - lse_i) v_j`, per query head; o `[n, n_head * dv]`, lse
/// `[n, n_head]`). The softmax subtracts the row's largest score before exp, as the kernel.
pub fn attention_train_ref(
    p: &TrainAttention,
    q: &[f64],
    k: &[f64],
    v: &[f64],
    start: &[u32],
) -> (Vec<f64>, Vec<f64>) {
    let mut o = vec![0.0; p.n * p.n_head * p.dv];
    let mut lse = vec![0.0; p.n * p.n_head];
    for i in 0..p.n {
        for h in 0..p.n_head {
            let keys = p.keys(start, i);
            let s: Vec<f64> = keys.clone().map(|j| p.score(q, k, i, h, j).0).collect();
            let m = s.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let l: f64 = s.iter().map(|x| (x - m).exp()).sum();
            let row_lse = m + l.ln();
            lse[i * p.n_head + h] = row_lse;
            let out = &mut o[(i * p.n_head + h) * p.dv..][..p.dv];
            for (j, sj) in keys.zip(&s) {
                let w = (sj - row_lse).exp();
                for (od, vd) in out.iter_mut().zip(p.v_row(v, j, h)) {
                    *od += w * vd;
                }
            }
        }
    }
    (o, lse)
}

/// Bound on the GPU's error in the score `s = cap(scale q . k)` of (i, h, j), given the
/// f32 inputs (as f64): the dot product of dk terms, `(dk + 5) u |scale| sum |q k|` (any order
/// of f32 sums, fma or not, and the scale's product), plus the soft-cap's tanh (Vulkan: through
/// exp; [`unary::bound`]). The cap's slope is at most 1, so the dot's error passes through.
pub(crate) fn score_bound(
    p: &TrainAttention,
    q: &[f64],
    k: &[f64],
    i: usize,
    h: usize,
    j: usize,
) -> f64 {
    let abs: f64 = p
        .q_row(q, i, h)
        .iter()
        .zip(p.k_row(k, j, h))
        .map(|(a, b)| (a * b).abs())
        .sum();
    let scale = f64::from(p.scale);
    let mut bound = (p.dk + 5) as f64 * U * abs * scale.abs();
    if p.softcap > 0.0 {
        let raw = scale * dot(p.q_row(q, i, h), p.k_row(k, j, h));
        bound += unary::bound(UnaryOp::SoftCap, raw, f64::from(p.softcap), 0.0);
    }
    bound
}

/// Tolerance, per (row, head): o `max|v| (e^2D - 1 + u (12 + 10E) + (2n + 2T + 8) u)` and lse
/// `D + u (12 + 10E) + (2n + 2T + 8) u + 2^-21 + 6u |log l| + u |lse|`, n the keys the row
/// sees, `T = n/32 + 2 + 2S` the key tiles (plus slack; S splits of the keys each cut a tile
/// and add one rescaling in the combine, whose exp error the 12 + 10E term covers as a tile's
/// rescaling: `|m_s - m| <= |s_j - m|` for every key j of split s). D bounds each score's error
/// (`score_bound`'s dot product and soft-cap); shifting scores by at most D moves each
/// softmax weight by a factor within `e^(+-2D)` and the log-sum-exp by D. exp errs by (3 +
/// 2|x|) ulp (Vulkan) at x = s - max, x's own rounding adds u|x|: weighted by the softmax,
/// `u (12 + 10E)` with `E = sum w_j |s_j - m|`. The sums of n terms into o and l err by n u
/// each; each tile's rescaling by `exp(m_old - m_new)` scales o and l alike but rounds once
/// a tile (T); the final division adds u. lse = m + log l: l's relative error as above
/// becomes an absolute error of log l, Vulkan's log adds 2^-21 absolute on [0.5, 2] and 3 ulp
/// elsewhere, the sum u |lse|. As the cache attention's bound (`attention`'s CHECK), with no
/// splits.
pub const CHECK: Check = Check {
    name: "attention_train",
    tolerance: "o max|v|(e^2D-1 + u(12+10E) + (2n+2T+8)u); lse D + u(12+10E) + (2n+2T+8)u + 2^-21 + 6u|log l| + u|lse|",
    case: parity_case,
};

/// One random block: shape, sequences, window, soft-cap and f32 inputs (kept as f32 for the
/// GPU and widened for the references).
#[derive(Debug, Clone)]
pub(crate) struct Inputs {
    pub p: TrainAttention,
    pub q: Vec<f32>,
    pub k: Vec<f32>,
    pub v: Vec<f32>,
    pub start: Vec<u32>,
}

impl Inputs {
    /// Draws a case: up to 3 sequences in up to 90 rows (past one 64-key tile), GQA groups
    /// of 1 to 3, head dims from 1 to [`MAX_HEAD_DIM`] (dk and dv apart or equal), windows
    /// shorter and longer than the sequences, no cap or a cap that bends the scores, q
    /// scaled up for sharper softmaxes.
    pub(crate) fn random(rng: &mut Rng) -> Inputs {
        let n_kv = rng.range(1, 3);
        let n_head = n_kv * rng.range(1, 4);
        let dk = rng.pick(&[1, 3, 8, 16, 64, 72, 128, 256, 512]);
        let dv = if rng.bool() {
            dk
        } else {
            rng.pick(&[2, 8, 64, 100, 256])
        };
        let n = if dk.max(dv) >= 256 {
            rng.range(1, 24)
        } else {
            rng.range(1, 90)
        };
        let p = TrainAttention {
            n,
            n_head,
            n_kv,
            dk,
            dv,
            scale: rng.pick(&[1.0 / (dk as f32).sqrt(), 0.5]),
            window: rng.pick(&[0, 0, 1, 5, 70]),
            softcap: rng.pick(&[0.0, 0.0, 2.0, 30.0]),
        };
        let cuts = [rng.range(0, n + 1), rng.range(0, n + 1)];
        let start = (0..n)
            .map(|i| cuts.iter().copied().filter(|&c| c <= i).max().unwrap_or(0) as u32)
            .collect();
        let gain = rng.pick(&[1.0, 4.0]);
        let q = random_f32(n * n_head * dk, rng.next_u64())
            .into_iter()
            .map(|x| x * gain)
            .collect();
        Inputs {
            p,
            q,
            k: random_f32(n * n_kv * dk, rng.next_u64()),
            v: random_f32(n * n_kv * dv, rng.next_u64()),
            start,
        }
    }

    /// `(q, k, v)` widened to f64.
    pub(crate) fn wide(&self) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
        let w = |x: &[f32]| x.iter().map(|&a| f64::from(a)).collect::<Vec<f64>>();
        (w(&self.q), w(&self.k), w(&self.v))
    }
}

/// `x` after `pad` junk elements, on the GPU.
pub(crate) fn padded(gpu: &Gpu, x: &[f32], pad: usize) -> GpuTensor {
    GpuTensor::from_f32(gpu, &[pad + x.len()], &[&vec![7.0; pad][..], x].concat())
}

fn parity_case(gpu: &Gpu, rng: &mut Rng) -> Result<Compare, GpuError> {
    let c = Inputs::random(rng);
    compare(gpu, &c, rng.pick(&[1, 1, 2, 3, 16]))
}

/// The GPU's o and lse against the reference, the keys split `splits` ways (through a
/// scratch at an offset) when more than 1.
fn compare(gpu: &Gpu, c: &Inputs, splits: usize) -> Result<Compare, GpuError> {
    compare_with(gpu, c, splits, false)
}

/// As [`compare`], on the tensor-core kernel with `coop` (its emulated program on a device
/// without cooperative matrices) and its bound (`ops::attention_train_coop`'s module doc).
pub(crate) fn compare_with(
    gpu: &Gpu,
    c: &Inputs,
    splits: usize,
    coop: bool,
) -> Result<Compare, GpuError> {
    let p = c.p;
    let (n_o, n_lse) = (p.n * p.n_head * p.dv, p.n * p.n_head);
    let (qt, kt, vt) = (
        padded(gpu, &c.q, 1),
        padded(gpu, &c.k, 2),
        padded(gpu, &c.v, 3),
    );
    let st = GpuTensor::from_u32(gpu, &[p.n + 1], &[&[5][..], &c.start[..]].concat());
    let out = GpuTensor::zeros(gpu, &[1 + n_o + n_lse], Dtype::F32);
    let scratch = GpuTensor::zeros(gpu, &[3 + p.forward_scratch_len(splits)], Dtype::F32);
    let scratch = (splits > 1).then(|| View::at(&scratch, 3));
    let forward = TrainAttentionForward {
        q: View::at(&qt, 1),
        k: View::at(&kt, 2),
        v: View::at(&vt, 3),
        start: View::at(&st, 1),
        o: View::at(&out, 1),
        lse: View::at(&out, 1 + n_o),
    };
    let ops = p.forward_ops_with(coop, forward, scratch, splits)?;
    let splits = splits.clamp(1, p.dq_key_tiles()); // as the op clamps it
    let got: Vec<f32> = run_read(gpu, ops, &out, 1, n_o + n_lse)?;
    let (q, k, v) = c.wide();
    let (o, lse) = attention_train_ref(&p, &q, &k, &v, &c.start);
    let mut cmp = Compare::default();
    for i in 0..p.n {
        for h in 0..p.n_head {
            let at = i * p.n_head + h;
            let keys = p.keys(&c.start, i);
            let big_d = keys
                .clone()
                .map(|j| match coop {
                    true => coop_score_bound(&p, &q, &k, i, h, j),
                    false => score_bound(&p, &q, &k, i, h, j),
                })
                .fold(0.0, f64::max);
            let e: f64 = keys
                .clone()
                .map(|j| {
                    let x = p.score(&q, &k, i, h, j).0 - lse[at];
                    x.exp() * x.abs()
                })
                .sum();
            let m = keys
                .clone()
                .map(|j| p.score(&q, &k, i, h, j).0)
                .fold(f64::NEG_INFINITY, f64::max);
            let vmax = keys
                .clone()
                .flat_map(|j| p.v_row(&v, j, h).iter().map(|x| x.abs()))
                .fold(0.0, f64::max);
            let nk = keys.len() as f64;
            // The tensor-core kernel combines four partial maxima and sums a pair.
            let combines = if coop { 4.0 } else { 0.0 };
            let tiles = nk / TILE as f64 + 2.0 + 2.0 * splits as f64 + combines;
            let common = U * (12.0 + 10.0 * e) + (2.0 * nk + 2.0 * tiles + 8.0) * U;
            let mut bound_o = vmax * ((2.0 * big_d).exp_m1() + common);
            if coop {
                let w: Vec<f64> = keys
                    .clone()
                    .map(|j| (p.score(&q, &k, i, h, j).0 - lse[at]).exp())
                    .collect();
                let e_v = keys
                    .clone()
                    .flat_map(|j| p.v_row(&v, j, h).iter().map(|&x| f16_err(x.abs())))
                    .fold(0.0, f64::max);
                bound_o += coop_weights_bound(&w, big_d, vmax, e_v);
            }
            for d in 0..p.dv {
                let want = p.o_row(&o, i, h)[d];
                c_add(&mut cmp, got[at * p.dv + d], want, bound_o, || {
                    format!("{p:?} o row {i} head {h} dim {d}")
                });
            }
            let bound_lse =
                big_d + common + 8.0 * U + 6.0 * U * (lse[at] - m).abs() + U * lse[at].abs();
            c_add(&mut cmp, got[n_o + at], lse[at], bound_lse, || {
                format!("{p:?} lse row {i} head {h}")
            });
        }
    }
    Ok(cmp)
}

fn c_add(c: &mut Compare, got: f32, want: f64, bound: f64, at: impl FnOnce() -> String) {
    c.add(f64::from(got), want, bound, at);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil;

    #[test]
    fn attention_train_matches_reference() {
        testutil::parity("attention_train", 8, 71);
    }

    /// The cases the random draw may miss: one row; a key tile boundary (70 keys); Gemma's
    /// head dim with a window and a cap; two sequences packed, GQA of 3; a window past u32.
    #[test]
    fn attention_train_edges() {
        let Some(gpu) = testutil::gpu() else { return };
        let shapes = [
            (1, 1, 1, 4, 4, 0, 0.0),
            (70, 2, 1, 16, 8, 0, 0.0),
            (9, 4, 1, 256, 256, 4, 30.0),
            (20, 3, 1, 32, 32, 0, 2.0),
            (5, 2, 2, 8, 8, usize::MAX, 0.0),
        ];
        for (case, &(n, n_head, n_kv, dk, dv, window, softcap)) in shapes.iter().enumerate() {
            let mut rng = Rng::new(case as u64);
            let p = TrainAttention {
                n,
                n_head,
                n_kv,
                dk,
                dv,
                scale: 1.0 / (dk as f32).sqrt(),
                window,
                softcap,
            };
            let start = (0..n as u32).map(|i| if i < 12 { 0 } else { 12 }).collect();
            let inputs = Inputs {
                p,
                q: random_f32(n * n_head * dk, rng.next_u64()),
                k: random_f32(n * n_kv * dk, rng.next_u64()),
                v: random_f32(n * n_kv * dv, rng.next_u64()),
                start,
            };
            let c = compare(gpu, &inputs, 1 + case % 3).unwrap();
            assert!(c.n > 0 && c.max_ratio <= 1.0, "{}", c.worst);
        }
    }

    /// Shapes the kernels do not implement are typed errors naming the op, as are views too
    /// short for the shape.
    #[test]
    fn rejects_bad_shapes() {
        let p = TrainAttention {
            n: 4,
            n_head: 4,
            n_kv: 2,
            dk: 8,
            dv: 8,
            scale: 1.0,
            window: 0,
            softcap: 0.0,
        };
        assert!(p.validate("t").is_ok());
        for bad in [
            TrainAttention { n_kv: 3, ..p },
            TrainAttention { n_kv: 0, ..p },
            TrainAttention { n: 0, ..p },
            TrainAttention { dk: 0, ..p },
            TrainAttention {
                dv: MAX_HEAD_DIM + 1,
                ..p
            },
            TrainAttention { softcap: -1.0, ..p },
            TrainAttention {
                scale: f32::NAN,
                ..p
            },
        ] {
            let e = bad.validate("attention_train").unwrap_err();
            assert!(
                matches!(
                    e,
                    GpuError::InvalidParams {
                        op: "attention_train",
                        ..
                    }
                ),
                "{e}"
            );
        }
        let Some(gpu) = testutil::gpu() else { return };
        let t = GpuTensor::zeros(gpu, &[4 * 4 * 8], Dtype::F32);
        let short = GpuTensor::zeros(gpu, &[4 * 4 * 8 - 1], Dtype::F32);
        let st = GpuTensor::from_u32(gpu, &[4], &[0; 4]);
        let e = p
            .forward_op(TrainAttentionForward {
                q: (&t).into(),
                k: (&t).into(),
                v: (&t).into(),
                start: (&st).into(),
                o: (&short).into(),
                lse: (&t).into(),
            })
            .unwrap_err();
        assert!(
            matches!(
                e,
                GpuError::Shape {
                    op: "attention_train o",
                    ..
                }
            ),
            "{e}"
        );
    }

    /// The reference's softmax sums to one over the keys a row sees and gives nothing to the
    /// others: v = one-hot rows make o the weights themselves.
    #[test]
    fn reference_weights_sum_to_one() {
        let p = TrainAttention {
            n: 6,
            n_head: 2,
            n_kv: 1,
            dk: 3,
            dv: 6,
            scale: 0.7,
            window: 2,
            softcap: 1.5,
        };
        let start = [0, 0, 0, 3, 3, 3];
        let q: Vec<f64> = random_f32(36, 1).into_iter().map(f64::from).collect();
        let k: Vec<f64> = random_f32(18, 2).into_iter().map(f64::from).collect();
        let v: Vec<f64> = (0..36).map(|x| f64::from(x % 7 == 0)).collect();
        let (o, lse) = attention_train_ref(&p, &q, &k, &v, &start);
        for i in 0..6 {
            for h in 0..2 {
                let w = p.o_row(&o, i, h);
                assert!((w.iter().sum::<f64>() - 1.0).abs() < 1e-12);
                for (j, &wj) in w.iter().enumerate() {
                    assert_eq!(wj > 0.0, p.keys(&start, i).contains(&j), "row {i} key {j}");
                }
                assert!(lse[i * 2 + h].is_finite());
            }
        }
    }
}
