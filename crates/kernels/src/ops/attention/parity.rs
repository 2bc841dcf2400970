//! The attention kernel's CPU reference with its error bound, and its parity check (whose
//! cases the other attention kernels' checks draw too).

use super::*;
use crate::device::Gpu;
use crate::ops::kv::KvAppend;
use crate::ops::matmul_coop::f16_err;
use crate::ops::unary;
use crate::ops::unary::UnaryOp;
use crate::parity::data::{Rng, random_f32};
use crate::parity::{Check, Compare, U, run_read};
use crate::tensor::Dtype;

impl Attention {
    /// CPU reference in f64, with the error bound of each output row (see [`CHECK`]).
    /// `k`, `v`: the cache's values (decoded), `q` with `q_stride`, `pos` per token.
    pub fn reference(
        &self,
        l: &KvLayout,
        q: &[f32],
        k: &[f32],
        v: &[f32],
        pos: &[u32],
    ) -> Reference {
        self.reference_with(l, q, Arith::default(), k, v, pos)
    }

    /// [`Attention::reference`] for the arithmetic `arith` describes: a query the GPU holds
    /// only to within `q_err` (per element, indexed as `q`; each score's bound D grows by
    /// |scale| sum_d q_err_d |k_d| and that part's own rounding, what the GPU's dot product can
    /// differ by), and the tensor cores' rounding of the softmax weights (`p_f16`).
    pub fn reference_with(
        &self,
        l: &KvLayout,
        q: &[f32],
        arith: Arith<'_>,
        k: &[f32],
        v: &[f32],
        pos: &[u32],
    ) -> Reference {
        let Arith {
            q_err,
            p_f16,
            combines,
        } = arith;
        let hd = l.head_dim;
        let group = self.n_heads / l.n_kv_heads;
        let scale = f64::from(self.scale);
        let cap = f64::from(self.softcap);
        let mut out = Vec::new();
        let mut bound = Vec::new();
        for (t, &at) in pos.iter().enumerate().take(self.n_tokens) {
            let at = at as usize;
            let hi = (at + 1).min(l.max_len);
            let lo = if self.window > 0 {
                (at + 1).saturating_sub(self.window)
            } else {
                0
            };
            for h in 0..self.n_heads {
                let kvh = h / group;
                let qr = &q[t * self.q_stride + h * hd..][..hd];
                let mut s = Vec::new();
                let mut delta: f64 = 0.0;
                for j in lo..hi {
                    let kr = &k[l.index(kvh, j, 0)..][..hd];
                    let dot: f64 = qr
                        .iter()
                        .zip(kr)
                        .map(|(&a, &b)| f64::from(a) * f64::from(b))
                        .sum();
                    let abs: f64 = qr
                        .iter()
                        .zip(kr)
                        .map(|(&a, &b)| (f64::from(a) * f64::from(b)).abs())
                        .sum();
                    let mut sj = dot * scale;
                    let mut dj = (hd + 5) as f64 * U * abs * scale.abs();
                    if let Some(e) = q_err {
                        let e = &e[t * self.q_stride + h * hd..][..hd];
                        let shift: f64 = e
                            .iter()
                            .zip(kr)
                            .map(|(&e, &b)| e * f64::from(b).abs())
                            .sum();
                        dj += shift * scale.abs() * (1.0 + (hd + 5) as f64 * U);
                    }
                    if cap > 0.0 {
                        dj += unary::bound(UnaryOp::SoftCap, sj, cap, 0.0);
                        sj = cap * (sj / cap).tanh();
                    }
                    delta = delta.max(dj);
                    s.push(sj);
                }
                let m = s.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                let p: Vec<f64> = s.iter().map(|&x| (x - m).exp()).collect();
                let sum: f64 = p.iter().sum();
                let e: f64 = s.iter().zip(&p).map(|(&x, &w)| w / sum * (m - x)).sum();
                let mut vmax: f64 = 0.0;
                for d in 0..hd {
                    let mut o = 0.0;
                    for (jj, j) in (lo..hi).enumerate() {
                        let vv = f64::from(v[l.index(kvh, j, d)]);
                        vmax = vmax.max(vv.abs());
                        o += p[jj] / sum * vv;
                    }
                    out.push(o);
                }
                let n = (hi - lo) as f64;
                let tiles = n / KEY_TILE as f64 + 2.0;
                // Rescalings besides the tiles': a split's key groups merged, then the
                // splits, then the key groups' shares of the splits; and the partials a row
                // combines.
                let splits = (self.n_splits(l) + 2 * self.key_groups(l) as usize + combines) as f64;
                let mut rel = (2.0 * delta).exp_m1()
                    + U * (12.0 + 10.0 * e)
                    + (2.0 * n + 2.0 * tiles + 2.0 * splits + 8.0) * U;
                if p_f16 {
                    // Each weight rounded to f16 (less than one ulp, or flushed below the
                    // smallest normal), then summed on the tensor cores: (4n + 1) u.
                    let rounding: f64 = p.iter().map(|&w| f16_err(w / sum)).sum();
                    rel += rounding + (4.0 * n + 1.0) * U;
                }
                bound.push(vmax * rel);
            }
        }
        Reference { out, bound }
    }
}

/// How a kernel's arithmetic departs from the f32 kernel's, for [`Attention::reference_with`].
#[derive(Debug, Clone, Copy, Default)]
pub struct Arith<'a> {
    /// Per-element bound of the query's error (a rotated or rounded q), indexed as q.
    pub q_err: Option<&'a [f64]>,
    /// The softmax weights rounded to f16 before they multiply V, and that sum done on the
    /// tensor cores ([`crate::ops::attention_coop`]).
    pub p_f16: bool,
    /// Partial maxima and sums a row combines besides the key groups' (each a rescaling of
    /// its sum): [`crate::ops::attention_coop`]'s 4.
    pub combines: usize,
}

/// The reference output `[n_tokens, n_heads, head_dim]` and one bound per (token, head).
#[derive(Debug, Clone)]
pub struct Reference {
    /// The output, `[n_tokens, n_heads, head_dim]`.
    pub out: Vec<f64>,
    /// The error allowed on each (token, head) row.
    pub bound: Vec<f64>,
}

/// Tolerance, per output row: max|v| * (e^(2D) - 1 + 2^-24 (12 + 10 E) + (2n + 2T + 2S + 8)
/// 2^-24). D bounds each score's error: its dot product ((hd + 4) 2^-24 |scale| sum |q k|,
/// any order of f32 sums), the scale product, and the soft-cap's tanh (Vulkan: through exp).
/// Shifting scores by at most D moves each softmax weight by a factor within e^(+-2D).
/// exp itself errs by (3 + 2|x|) ulp (Vulkan) at x = s - max, and x's own rounding adds
/// |x| 2^-24; weighted by the softmax that is 2^-24 (12 + 10 E) with E = sum w_j |s_j - m|.
/// The online rescalings scale o and l alike (their error cancels) but round once per tile
/// (T) and merge (S: the splits plus twice the key groups); the sums of n terms into o and l err by n 2^-24 each. Reference: f64
/// over the values the cache holds (read back), so f16 storage is not counted here (see
/// kv_append).
pub const CHECK: Check = Check {
    name: "attention",
    tolerance: "max|v|*(e^2D-1 + 2^-24(12+10E) + (2n+2T+2S+8)2^-24)",
    case: parity_case,
};

/// One random attention case (shape and inputs drawn from `rng`).
#[derive(Debug, Clone, Copy)]
pub struct Case {
    /// The cache's shape.
    pub layout: KvLayout,
    /// The call.
    pub attn: Attention,
    /// Position of the first query token.
    pub start: usize,
    /// Multiplies q (sharper softmax).
    pub q_gain: f32,
}

fn parity_case(gpu: &Gpu, rng: &mut Rng) -> Result<Compare, GpuError> {
    let head_dim = rng.pick(&HEAD_DIMS);
    let n_kv_heads = rng.range(1, 3);
    let n_heads = n_kv_heads * rng.range(1, 5);
    let max_len = rng.range(16, 400);
    let n_tokens = if rng.bool() { 1 } else { rng.range(2, 7) };
    let layout = KvLayout {
        dtype: rng.pick(&[KvDtype::F32, KvDtype::F16]),
        n_kv_heads,
        head_dim,
        max_len,
    };
    let attn = random_attention(rng, n_tokens, n_heads, head_dim, max_len);
    // Drawn after the rest, as before the draw was shared: the same cases per seed.
    let attn = Attention {
        split_len: rng.pick(&[16, 48, 256, max_len]),
        ..attn
    };
    let case = Case {
        layout,
        attn,
        start: rng.range(0, max_len - n_tokens + 1),
        q_gain: rng.pick(&[1.0, 4.0]),
    };
    compare(gpu, case, rng.next_u64())
}

/// A random attention of `n_tokens` rows of `n_heads` heads over a cache of `max_len`
/// (one split, `split_len = max_len`): a padded q stride or not, the usual scale or 1, a
/// soft-cap or none, a sliding window or none. Shared by the parity cases of every attention
/// kernel, which draw the shape themselves.
pub(crate) fn random_attention(
    rng: &mut Rng,
    n_tokens: usize,
    n_heads: usize,
    head_dim: usize,
    max_len: usize,
) -> Attention {
    Attention {
        n_tokens,
        n_heads,
        q_stride: n_heads * head_dim + rng.range(0, 2) * 16,
        scale: if rng.bool() {
            1.0 / (head_dim as f32).sqrt()
        } else {
            1.0
        },
        softcap: if rng.bool() { 0.0 } else { 30.0 },
        window: if rng.bool() {
            0
        } else {
            rng.range(1, max_len + 8)
        },
        split_len: max_len,
    }
}

/// Fills the cache for positions `0..start + n_tokens` through [`KvAppend`], runs attention
/// for the block at `start..`, compares with [`Attention::reference`] over the cache as read
/// back.
pub fn compare(gpu: &Gpu, case: Case, seed: u64) -> Result<Compare, GpuError> {
    compare_on(gpu, case, seed, Path::Plain)
}

/// Which kernel [`compare_on`] runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Path {
    /// [`Attention::ops`].
    Plain,
    /// [`Attention::coop_ops`] (on a device without cooperative matrices, its emulated
    /// program: tests only), against [`crate::ops::attention_coop::reference`]; with
    /// `f16_q` the query drawn as f16 values, so that its rounding errs by nothing; each row
    /// tile's keys split `splits` ways.
    Coop { f16_q: bool, splits: usize },
}

/// [`compare`] through the kernel `path` names.
pub(crate) fn compare_on(
    gpu: &Gpu,
    case: Case,
    seed: u64,
    path: Path,
) -> Result<Compare, GpuError> {
    let Case {
        layout: l,
        attn,
        start,
        q_gain,
    } = case;
    let hd = l.head_dim;
    let n_hist = start + attn.n_tokens;
    let row = l.n_kv_heads * hd;
    let kv = random_f32(2 * n_hist * row, seed);
    let q: Vec<f32> = random_f32(
        (attn.n_tokens - 1) * attn.q_stride + attn.n_heads * hd,
        seed ^ 3,
    )
    .iter()
    .map(|x| x * q_gain)
    .map(|x| match path {
        Path::Coop { f16_q: true, .. } => half::f16::from_f32(x).to_f32(),
        _ => x,
    })
    .collect();
    let all_pos: Vec<u32> = (0..n_hist as u32).collect();
    let cache = KvCache::new(gpu, l)?;
    let kvt = GpuTensor::from_f32(gpu, &[kv.len()], &kv);
    let qt = GpuTensor::from_f32(gpu, &[q.len() + 1], &[&[5.0], &q[..]].concat());
    let pt = GpuTensor::from_u32(gpu, &[n_hist], &all_pos);
    let n_out = attn.n_tokens * attn.n_heads * hd;
    let out = GpuTensor::zeros(gpu, &[n_out + 2], Dtype::F32);
    let splits = GpuTensor::zeros(gpu, &[attn.splits_len(&l).max(1)], Dtype::U32);
    let append = KvAppend {
        n_tokens: n_hist,
        src_stride: 2 * row,
    };
    let mut ops = vec![append.op((&kvt).into(), View::at(&kvt, row), (&pt).into(), &cache)?];
    let (qv, pv, ov) = (View::at(&qt, 1), View::at(&pt, start), View::at(&out, 2));
    ops.extend(match path {
        Path::Plain => attn.ops(qv, pv, &cache, ov, Some(&splits))?,
        Path::Coop { splits, .. } => {
            let len = attn.coop_scratch_len(&l, splits);
            let scratch = GpuTensor::zeros(gpu, &[len + 3], Dtype::F32);
            let sv = (len > 0).then(|| View::at(&scratch, 3));
            attn.coop_ops(qv, pv, &cache, ov, sv, splits)?
        }
    });
    let y: Vec<f32> = run_read(gpu, ops, &out, 2, n_out)?;
    let words = l.words();
    let kw: Vec<u32> = run_read(gpu, Vec::new(), &cache.k, 0, words)?;
    let vw: Vec<u32> = run_read(gpu, Vec::new(), &cache.v, 0, words)?;
    let (k, v, pos) = (l.decode(&kw), l.decode(&vw), &all_pos[start..]);
    let r = match path {
        Path::Plain => attn.reference(&l, &q, &k, &v, pos),
        Path::Coop { f16_q, splits } => {
            crate::ops::attention_coop::reference(&attn, &l, &q, &k, &v, pos, f16_q, splits)
        }
    };
    let mut c = Compare::default();
    for (i, (&g, &w)) in y.iter().zip(&r.out).enumerate() {
        c.add(f64::from(g), w, r.bound[i / hd], || {
            format!(
                "{case:?}: token {} head {} dim {}",
                i / hd / attn.n_heads,
                i / hd % attn.n_heads,
                i % hd
            )
        });
    }
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil;

    #[test]
    fn attention_matches_reference() {
        testutil::parity("attention", 10, 91);
    }

    /// The shuffles only where a row's lanes fit one subgroup of a fixed size that divides
    /// both workgroups: NVIDIA's 32 takes every head dim, lavapipe's 8 head_dim 64 only, a
    /// varying size (Intel's 8..32) or no subgroups none.
    #[test]
    fn subgroup_choice() {
        let caps = |subgroup, min, max| Caps {
            shader_f16: true,
            subgroup,
            subgroup_min_size: min,
            subgroup_max_size: max,
            timestamps: true,
            coop_f16: false,
        };
        for hd in HEAD_DIMS {
            assert!(in_subgroups(&caps(true, 32, 32), hd as u32));
            assert!(in_subgroups(&caps(true, 64, 64), hd as u32));
            assert_eq!(in_subgroups(&caps(true, 8, 8), hd as u32), hd == 64);
            assert!(!in_subgroups(&caps(true, 8, 32), hd as u32));
            assert!(!in_subgroups(&caps(false, 32, 32), hd as u32));
        }
        assert!(!in_subgroups(&caps(true, 128, 128), 128));
    }

    /// The tile reduction through workgroup memory where the device has subgroups (the
    /// parity run above takes the shuffles for the heads whose lanes fit a subgroup).
    #[test]
    fn without_subgroups() {
        let Some(gpu) = testutil::device_without(wgpu::Features::SUBGROUP) else {
            return;
        };
        assert!(!in_subgroups(&gpu.caps, 64));
        for check in [CHECK, crate::ops::attention_rope::CHECK] {
            let r = check.run(&gpu, 10, 97);
            assert!(r.passed(), "{r}");
        }
    }

    /// The last workgroup of each row tile leaves its arrival counter at zero: the same
    /// decode op run three times in one step gives the same output each time (a counter
    /// left behind would make no workgroup the last, or one too early), and the counters
    /// read back zero.
    #[test]
    fn splits_counters_reset() {
        let Some(gpu) = testutil::gpu() else { return };
        let l = KvLayout {
            dtype: KvDtype::F16,
            n_kv_heads: 2,
            head_dim: 64,
            max_len: 200,
        };
        let attn = Attention {
            n_tokens: 1,
            n_heads: 14,
            q_stride: 14 * 64,
            scale: 0.125,
            softcap: 0.0,
            window: 0,
            split_len: 16,
        };
        assert_eq!(attn.n_splits(&l), 13);
        let row = l.n_kv_heads * l.head_dim;
        let kv = random_f32(2 * l.max_len * row, 5);
        let pos: Vec<u32> = (0..l.max_len as u32).collect();
        let cache = KvCache::new(gpu, l).unwrap();
        let kvt = GpuTensor::from_f32(gpu, &[kv.len()], &kv);
        let pt = GpuTensor::from_u32(gpu, &[l.max_len], &pos);
        let qt = GpuTensor::from_f32(gpu, &[14 * 64], &random_f32(14 * 64, 6));
        let n_out = 14 * 64;
        let out = GpuTensor::zeros(gpu, &[3 * n_out], Dtype::F32);
        let splits = GpuTensor::zeros(gpu, &[attn.splits_len(&l)], Dtype::U32);
        let append = KvAppend {
            n_tokens: l.max_len,
            src_stride: 2 * row,
        };
        let mut ops = vec![
            append
                .op((&kvt).into(), View::at(&kvt, row), (&pt).into(), &cache)
                .unwrap(),
        ];
        for i in 0..3 {
            let o = View::at(&out, i * n_out);
            let at = View::at(&pt, 150 + 10 * (i % 2));
            ops.extend(
                attn.ops((&qt).into(), at, &cache, o, Some(&splits))
                    .unwrap(),
            );
        }
        let y: Vec<f32> = run_read(gpu, ops, &out, 0, 3 * n_out).unwrap();
        assert_eq!(y[..n_out], y[2 * n_out..]);
        assert_ne!(y[..n_out], y[n_out..2 * n_out]);
        assert!(y.iter().all(|v| v.is_finite()) && y.iter().any(|&v| v != 0.0));
        let counters: Vec<u32> = run_read(gpu, Vec::new(), &splits, 0, attn.counters(&l)).unwrap();
        assert!(counters.iter().all(|&c| c == 0), "{counters:?}");
    }

    /// Gemma-3-270m's decode (4 heads over 1 kv head of 256, sliding window 512) at
    /// position 700, in one pass and in splits of 64; and prompt blocks (Qwen-like, Gemma's,
    /// head_dim 128), which take the 256-invocation workgroups.
    #[test]
    fn model_shapes() {
        let Some(gpu) = testutil::gpu() else { return };
        let gemma = |dtype, split_len, window| Case {
            layout: KvLayout {
                dtype,
                n_kv_heads: 1,
                head_dim: 256,
                max_len: 704,
            },
            attn: Attention {
                n_tokens: 1,
                n_heads: 4,
                q_stride: 1024,
                scale: 1.0 / 16.0,
                softcap: 0.0,
                window,
                split_len,
            },
            start: 700,
            q_gain: 4.0,
        };
        let qwen = Case {
            layout: KvLayout {
                dtype: KvDtype::F16,
                n_kv_heads: 2,
                head_dim: 64,
                max_len: 96,
            },
            attn: Attention {
                n_tokens: 9,
                n_heads: 14,
                q_stride: 14 * 64 + 2 * 2 * 64,
                scale: 0.125,
                softcap: 0.0,
                window: 0,
                split_len: 96,
            },
            start: 80,
            q_gain: 4.0,
        };
        // Prompt blocks (workgroups of 256): gemma's 40 tokens crossing the sliding window,
        // and head_dim 128 with 2 kv heads.
        let gemma_prompt = Case {
            attn: Attention {
                n_tokens: 40,
                ..gemma(KvDtype::F16, 704, 512).attn
            },
            start: 560,
            ..gemma(KvDtype::F16, 704, 512)
        };
        let hd128 = Case {
            layout: KvLayout {
                dtype: KvDtype::F32,
                n_kv_heads: 2,
                head_dim: 128,
                max_len: 64,
            },
            attn: Attention {
                n_tokens: 21,
                n_heads: 4,
                q_stride: 4 * 128,
                scale: 1.0 / 128f32.sqrt(),
                softcap: 30.0,
                window: 0,
                split_len: 64,
            },
            start: 40,
            q_gain: 4.0,
        };
        for (i, case) in [
            gemma(KvDtype::F32, 704, 512),
            gemma(KvDtype::F16, 64, 512),
            gemma(KvDtype::F16, 128, 0),
            qwen,
            gemma_prompt,
            hd128,
        ]
        .into_iter()
        .enumerate()
        {
            let c = compare(gpu, case, i as u64).unwrap();
            assert!(c.max_ratio <= 1.0, "{}", c.worst);
        }
    }
}
