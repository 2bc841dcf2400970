//! The training attention backward's CPU reference, its finite-difference test and its parity
//! check.

use super::*;
use crate::device::Gpu;
use crate::ops::attention_train::{Inputs, attention_train_ref, dot, padded, score_bound};
use crate::ops::attention_train_coop::parity::coop_score_bound;
use crate::ops::matmul_coop::f16_err;
use crate::parity::data::{Rng, random_f32};
use crate::parity::{Check, Compare, U, run_read};
use crate::tensor::{Dtype, GpuTensor};

/// CPU reference, in f64: `(dq, dk, dv)` of the training attention for the output gradient
/// `d_o` (`[n, n_head * dv]`), FlashAttention-2's backward (the module docs' maths): it
/// recomputes the forward ([`attention_train_ref`]) for o and lse, then per query head and
/// pair (i, j) with row i seeing key j takes `p = exp(s_ij - lse_i)`, `ds = p (d_o_i . v_j -
/// d_o_i . o_i) cap'`, and adds `scale ds k_j` to dq_i, `scale ds q_i` to dk_j and `p d_o_i`
/// to dv_j (a kv head's dk and dv summing over its query heads). Layouts: dq as q, dk as k,
/// dv as v.
pub fn attention_backward_ref(
    p: &TrainAttention,
    q: &[f64],
    k: &[f64],
    v: &[f64],
    start: &[u32],
    d_o: &[f64],
) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let (o, lse) = attention_train_ref(p, q, k, v, start);
    let scale = f64::from(p.scale);
    let mut dq = vec![0.0; p.n * p.n_head * p.dk];
    let mut dk = vec![0.0; p.n * p.n_kv * p.dk];
    let mut dv = vec![0.0; p.n * p.n_kv * p.dv];
    for i in 0..p.n {
        for h in 0..p.n_head {
            let g = p.kv_head(h);
            let doi = p.o_row(d_o, i, h);
            let big_d = dot(doi, p.o_row(&o, i, h));
            for j in p.keys(start, i) {
                let (s, cap_grad) = p.score(q, k, i, h, j);
                let pr = (s - lse[i * p.n_head + h]).exp();
                let ds = pr * (dot(doi, p.v_row(v, j, h)) - big_d) * cap_grad;
                let dq_row = &mut dq[(i * p.n_head + h) * p.dk..][..p.dk];
                for (a, kd) in dq_row.iter_mut().zip(p.k_row(k, j, h)) {
                    *a += scale * ds * kd;
                }
                let dk_row = &mut dk[(j * p.n_kv + g) * p.dk..][..p.dk];
                for (a, qd) in dk_row.iter_mut().zip(p.q_row(q, i, h)) {
                    *a += scale * ds * qd;
                }
                let dv_row = &mut dv[(j * p.n_kv + g) * p.dv..][..p.dv];
                for (a, gd) in dv_row.iter_mut().zip(doi) {
                    *a += pr * gd;
                }
            }
        }
    }
    (dq, dk, dv)
}

/// Tolerance, per element, from bounds on each pair (i, j)'s weight and ds. The score errs by
/// D (the forward's `score_bound`); lse is given in f32 (u |lse|) and `x = s - lse` rounds
/// (u |x|), so `p = exp(x)` errs by `p (e^(D + u|lse| + u|x|) - 1 + (6 + 4|x|) u)` (exp's (3 +
/// 2|x|) ulp). `dp = do . v` errs by `(dv + 2) u sum |do v|`, `D_i = do . o` by `(dv + 3) u sum
/// |do o|` (o given in f32, one more u), their difference y adds u; the cap's derivative `1 -
/// t^2`, with t off by `e_t = D / c`, by `(2|t| + e_t) e_t + 2u`. ds = p y cap' then errs by
/// at most `(p + e_p)(|y| + e_y)(g + e_g) (1 + 2u) - p |y| g`. The sums: dv_j = sum p do_i
/// errs by `sum e_p |do| + (m + 2) u sum (p + e_p) |do|`, dk_j = scale sum ds q_i by
/// `|scale| (sum e_ds |q| + (m + 3) u sum (|ds| + e_ds) |q|)`, dq_i likewise with k, m the
/// terms summed (any order, fma or not, and the scale's product).
pub const CHECK: Check = Check {
    name: "attention_backward",
    tolerance: "per pair e_p = p(e^(D+u|lse|+u|x|)-1+(6+4|x|)u), e_ds from e_p, (dv+2)u sum|do v|, (dv+3)u sum|do o|, cap' ((2|t|+D/c)D/c+2u); sums (m+2..3)u",
    case: parity_case,
};

/// One pair's weight and ds with their error bounds (see [`CHECK`]).
struct PairErr {
    p: f64,
    ep: f64,
    ds: f64,
    eds: f64,
}

/// How far `x` may move rounded to f16 after scaling by `2^8` (the tensor-core kernels' do
/// and ds scale, exact in binary) and unscaled: one f16 ulp, or all of it near the flush line.
fn e16_scaled(x: f64) -> f64 {
    f16_err(x.abs() * DO_SCALE) / DO_SCALE
}

/// The tensor-core backward's factor on do and ds (`DO_SCALE` of its WGSL).
const DO_SCALE: f64 = 256.0;

/// The forward's values and the backward's inputs in f64, for the bounds; `coop`: the
/// tensor-core kernels' (f16 operands, see `ops::attention_train_coop`).
struct Wide<'a> {
    coop: bool,
    p: TrainAttention,
    q: &'a [f64],
    k: &'a [f64],
    v: &'a [f64],
    o: &'a [f64],
    lse: &'a [f64],
    d_o: &'a [f64],
}

impl Wide<'_> {
    fn pair(&self, i: usize, h: usize, j: usize) -> PairErr {
        let p = &self.p;
        let big_s = match self.coop {
            true => coop_score_bound(p, self.q, self.k, i, h, j),
            false => score_bound(p, self.q, self.k, i, h, j),
        };
        let (s, g) = p.score(self.q, self.k, i, h, j);
        let lse = self.lse[i * p.n_head + h];
        let x = s - lse;
        let pr = x.exp();
        let ep = pr * ((big_s + U * lse.abs() + U * x.abs()).exp_m1() + (6.0 + 4.0 * x.abs()) * U);
        let doi = p.o_row(self.d_o, i, h);
        let vj = p.v_row(self.v, j, h);
        let oi = p.o_row(self.o, i, h);
        let abs = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(x, y)| (x * y).abs()).sum::<f64>();
        let e_dp = match self.coop {
            // do (scaled) and v rounded to f16, the products' sums on the tensor cores.
            true => {
                let (mut first, mut mags) = (0.0, 0.0);
                for (&a, &b) in doi.iter().zip(vj) {
                    let (ea, eb) = (e16_scaled(a), f16_err(b.abs()));
                    first += a.abs() * eb + b.abs() * ea + ea * eb;
                    mags += (a.abs() + ea) * (b.abs() + eb);
                }
                first + (4 * p.dv + 5) as f64 * U * mags
            }
            false => (p.dv + 2) as f64 * U * abs(doi, vj),
        };
        let e_d = (p.dv + 3) as f64 * U * abs(doi, oi);
        let y = dot(doi, vj) - dot(doi, oi);
        let e_y = e_dp + e_d + U * (y.abs() + e_dp + e_d);
        let e_g = if p.softcap > 0.0 {
            let c = f64::from(p.softcap);
            let e_t = big_s / c;
            (2.0 * (s / c).abs() + e_t) * e_t + 2.0 * U
        } else {
            0.0
        };
        let ds = pr * y * g;
        let mag = (pr + ep) * (y.abs() + e_y) * (g + e_g);
        let eds = mag * (1.0 + 2.0 * U) - ds.abs();
        match self.coop {
            // P and ds (scaled) rounded to f16 for the second products.
            true => PairErr {
                p: pr,
                ep: ep + f16_err(pr + ep),
                ds,
                eds: eds + e16_scaled(mag * (1.0 + 2.0 * U)),
            },
            false => PairErr { p: pr, ep, ds, eds },
        }
    }
}

/// Per-element bound accumulators: `a = sum of first-order terms`, `b = sum |terms|` and the
/// count m of terms, giving `a + (m + extra) u b`.
#[derive(Clone, Default)]
struct Acc {
    a: f64,
    b: f64,
    m: usize,
}

impl Acc {
    /// `sums`: u's a term of the sums, 1 in f32 (any order, fma or not), 4 on the tensor cores
    /// (as `ops::attention_train_coop`'s bound on o).
    fn bound(&self, extra: f64, factor: f64, sums: f64) -> f64 {
        factor * (self.a + (sums * self.m as f64 + extra) * U * self.b)
    }
}

fn parity_case(gpu: &Gpu, rng: &mut Rng) -> Result<Compare, GpuError> {
    let c = Inputs::random(rng);
    let d_o = random_f32(c.p.n * c.p.n_head * c.p.dv, rng.next_u64());
    let splits = BackwardSplits {
        dq: rng.pick(&[1, 1, 2, 3, 16]),
        dkdv: rng.pick(&[1, 1, 2, 3, 16]),
    };
    compare(gpu, &c, &d_o, splits, false)
}

/// The GPU's gradients against the reference, the passes split as `splits` says (through a
/// scratch at an offset); `coop`: the tensor-core kernels (their emulated programs on a device
/// without cooperative matrices) and their bound (the module doc of `ops::attention_train_coop`).
pub(crate) fn compare(
    gpu: &Gpu,
    c: &Inputs,
    d_o: &[f32],
    splits: BackwardSplits,
    coop: bool,
) -> Result<Compare, GpuError> {
    let p = c.p;
    let (q, k, v) = c.wide();
    let (o, lse) = attention_train_ref(&p, &q, &k, &v, &c.start);
    // The backward's inputs as the GPU holds them: o and lse rounded to f32.
    let o32: Vec<f32> = o.iter().map(|&x| x as f32).collect();
    let lse32: Vec<f32> = lse.iter().map(|&x| x as f32).collect();
    let (nq, nk, nv) = (q.len(), k.len(), v.len());
    let (qt, kt, vt) = (
        padded(gpu, &c.q, 1),
        padded(gpu, &c.k, 2),
        padded(gpu, &c.v, 3),
    );
    let (ot, lt, dt) = (
        padded(gpu, &o32, 2),
        padded(gpu, &lse32, 1),
        padded(gpu, d_o, 3),
    );
    let st = GpuTensor::from_u32(gpu, &[p.n + 2], &[&[5, 5][..], &c.start[..]].concat());
    let grads = GpuTensor::zeros(gpu, &[1 + nq + nk + nv], Dtype::F32);
    let scratch = GpuTensor::zeros(gpu, &[4 + p.backward_scratch_len(splits)], Dtype::F32);
    let scratch = (splits != BackwardSplits::NONE).then(|| View::at(&scratch, 4));
    let backward = TrainAttentionBackward {
        q: View::at(&qt, 1),
        k: View::at(&kt, 2),
        v: View::at(&vt, 3),
        o: View::at(&ot, 2),
        lse: View::at(&lt, 1),
        d_o: View::at(&dt, 3),
        start: View::at(&st, 2),
        dq: View::at(&grads, 1),
        dk: View::at(&grads, 1 + nq),
        dv: View::at(&grads, 1 + nq + nk),
    };
    let ops = p.backward_ops_with(coop, backward, scratch, splits)?;
    let got: Vec<f32> = run_read(gpu, ops, &grads, 1, nq + nk + nv)?;
    let d_o: Vec<f64> = d_o.iter().map(|&x| f64::from(x)).collect();
    let (want_dq, want_dk, want_dv) = attention_backward_ref(&p, &q, &k, &v, &c.start, &d_o);
    let lse_in: Vec<f64> = lse32.iter().map(|&x| f64::from(x)).collect();
    let w = Wide {
        coop,
        p,
        q: &q,
        k: &k,
        v: &v,
        o: &o,
        lse: &lse_in,
        d_o: &d_o,
    };
    let (mut bq, mut bk, mut bv) = (
        vec![Acc::default(); nq],
        vec![Acc::default(); nk],
        vec![Acc::default(); nv],
    );
    for i in 0..p.n {
        for h in 0..p.n_head {
            let g = p.kv_head(h);
            for j in p.keys(&c.start, i) {
                let e = w.pair(i, h, j);
                // x's own f16 rounding on the tensor cores (`scaled`: do's, by 2^8).
                let add = |acc: &mut [Acc], err: f64, val: f64, x: &[f64], coop, scaled| {
                    for (a, xd) in acc.iter_mut().zip(x) {
                        let ex = match (coop, scaled) {
                            (false, _) => 0.0,
                            (true, true) => e16_scaled(*xd),
                            (true, false) => f16_err(xd.abs()),
                        };
                        a.a += err * xd.abs() + (val.abs() + err) * ex;
                        a.b += (val.abs() + err) * (xd.abs() + ex);
                        a.m += 1;
                    }
                };
                let qi = (i * p.n_head + h) * p.dk;
                add(
                    &mut bq[qi..][..p.dk],
                    e.eds,
                    e.ds,
                    p.k_row(&k, j, h),
                    coop,
                    false,
                );
                let kj = (j * p.n_kv + g) * p.dk;
                add(
                    &mut bk[kj..][..p.dk],
                    e.eds,
                    e.ds,
                    p.q_row(&q, i, h),
                    coop,
                    false,
                );
                let vj = (j * p.n_kv + g) * p.dv;
                add(
                    &mut bv[vj..][..p.dv],
                    e.ep,
                    e.p,
                    p.o_row(&d_o, i, h),
                    coop,
                    true,
                );
            }
        }
    }
    let scale = f64::from(p.scale).abs();
    let mut cmp = Compare::default();
    let sums = if coop { 4.0 } else { 1.0 };
    let parts = [
        ("dq", &want_dq, &bq, 0, 3.0, scale, sums, p.n_head * p.dk),
        ("dk", &want_dk, &bk, nq, 3.0, scale, sums, p.n_kv * p.dk),
        ("dv", &want_dv, &bv, nq + nk, 2.0, 1.0, sums, p.n_kv * p.dv),
    ];
    for (name, want, acc, at, extra, factor, sums, row) in parts {
        for (e, (wv, a)) in want.iter().zip(acc).enumerate() {
            let bound = a.bound(extra, factor, sums);
            cmp.add(f64::from(got[at + e]), *wv, bound, || {
                format!("{p:?} {name} row {} col {}", e / row, e % row)
            });
        }
    }
    Ok(cmp)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil;

    #[test]
    fn attention_backward_matches_reference() {
        testutil::parity("attention_backward", 8, 97);
    }

    /// Gemma's head dim with a window and a cap over two packed sequences, and a key tile
    /// boundary (70 rows) under GQA of 4 with the dq pass split 4 ways and dk/dv's 3.
    #[test]
    fn attention_backward_edges() {
        let Some(gpu) = testutil::gpu() else { return };
        let shapes = [(14, 2, 1, 256, 256, 5, 30.0), (70, 4, 1, 8, 16, 0, 0.0)];
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
            let inputs = Inputs {
                p,
                q: random_f32(n * n_head * dk, rng.next_u64()),
                k: random_f32(n * n_kv * dk, rng.next_u64()),
                v: random_f32(n * n_kv * dv, rng.next_u64()),
                start: (0..n as u32).map(|i| if i < 6 { 0 } else { 6 }).collect(),
            };
            let d_o = random_f32(n * n_head * dv, rng.next_u64());
            let splits = BackwardSplits {
                dq: 1 + 3 * case,
                dkdv: 1 + 2 * case,
            };
            let c = compare(gpu, &inputs, &d_o, splits, false).unwrap();
            assert!(c.n > 0 && c.max_ratio <= 1.0, "{}", c.worst);
        }
    }

    /// The reference is the gradient of the forward's reference: central differences of
    /// `L = sum d_o * o(q, k, v)` (f64, step 1e-5) against dq, dk and dv, on small shapes with
    /// GQA, two sequences in one block, a window, and the soft-cap on and off. The differences
    /// err by h^2/6 |L'''| plus eps |L| / h, both near 1e-10 here: the bound 1e-8 (1 + |ref|)
    /// leaves a factor of 10 and catches any missing term (each is of order 0.01 to 1).
    #[test]
    fn reference_is_the_forward_gradient() {
        let shape = |n, n_head, n_kv, dk, dv, window, softcap| TrainAttention {
            n,
            n_head,
            n_kv,
            dk,
            dv,
            scale: 0.9,
            window,
            softcap,
        };
        let cases: [(TrainAttention, &[u32]); 4] = [
            (shape(7, 4, 2, 3, 2, 0, 0.0), &[0, 0, 0, 3, 3, 3, 3]),
            (shape(7, 4, 2, 3, 2, 3, 1.5), &[0, 0, 0, 3, 3, 3, 3]),
            (shape(6, 3, 1, 4, 5, 2, 0.0), &[0; 6]),
            (shape(5, 2, 2, 2, 3, 0, 0.8), &[0, 0, 2, 2, 2]),
        ];
        for (case, &(p, start)) in cases.iter().enumerate() {
            let TrainAttention {
                n,
                n_head,
                n_kv,
                dk,
                dv,
                ..
            } = p;
            let seed = 10 * case as u64;
            let wide = |len: usize, s: u64, gain: f64| -> Vec<f64> {
                random_f32(len, s)
                    .into_iter()
                    .map(|x| f64::from(x) * gain)
                    .collect()
            };
            let q = wide(n * n_head * dk, seed + 1, 1.5);
            let k = wide(n * n_kv * dk, seed + 2, 1.5);
            let v = wide(n * n_kv * dv, seed + 3, 1.0);
            let d_o = wide(n * n_head * dv, seed + 4, 1.0);
            let loss = |q: &[f64], k: &[f64], v: &[f64]| -> f64 {
                let (o, _) = attention_train_ref(&p, q, k, v, start);
                dot(&o, &d_o)
            };
            let (dq, dk_ref, dv_ref) = attention_backward_ref(&p, &q, &k, &v, start, &d_o);
            let h = 1e-5;
            let fd = |which: usize, at: usize| -> f64 {
                let mut xs = [q.clone(), k.clone(), v.clone()];
                xs[which][at] += h;
                let up = loss(&xs[0], &xs[1], &xs[2]);
                xs[which][at] -= 2.0 * h;
                let down = loss(&xs[0], &xs[1], &xs[2]);
                (up - down) / (2.0 * h)
            };
            for (which, (name, grad)) in [("dq", &dq), ("dk", &dk_ref), ("dv", &dv_ref)]
                .into_iter()
                .enumerate()
            {
                for (at, &r) in grad.iter().enumerate() {
                    let f = fd(which, at);
                    assert!(
                        (f - r).abs() <= 1e-8 * (1.0 + r.abs()),
                        "case {case} {name} {at}: fd {f} ref {r}"
                    );
                }
            }
            // The cases exercise what they claim: every gradient has non-zero entries.
            for grad in [&dq, &dk_ref, &dv_ref] {
                assert!(grad.iter().any(|x| x.abs() > 1e-3));
            }
        }
    }
}
