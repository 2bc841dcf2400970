//! The rotating decode attention's parity check: against head_norm_rope_kv's reference
//! then attention's.

use super::*;
use crate::device::Gpu;
use crate::ops::attention::Arith;
use crate::ops::head_norm_rope::HostHeads;
use crate::ops::head_norm_rope::{HeadNormRope, Heads};
use crate::ops::head_norm_rope_kv::KvStore;
use crate::ops::kv::KvLayout;
use crate::ops::kv::{HostKv, KvAppend, store_bound};
use crate::ops::rope::rope_freqs;
use crate::parity::data::{Rng, random_f32};
use crate::parity::{Check, Compare};
use crate::readback::Readback;
use crate::step::StepBuilder;
use crate::tensor::Dtype;

/// Tolerance: the cache at the token's position as head_norm_rope_kv's (head_norm_rope's
/// bound on k, times 1 + 2^-10 for an f16 cache, plus kv_append's); every other position
/// exact (untouched); the output attention's bound over the cache as read back, its score
/// bound D grown by |scale| sum_d e_d |k_d| with e_d head_norm_rope's bound on q's element d
/// (`Attention::reference_with`).
pub const CHECK: Check = Check {
    name: "attention_rope",
    tolerance: "K/V at pos: head_norm_rope_kv's; out: attention's with D + |scale| sum e_q|k|",
    case: parity_case,
};

/// A random decode case.
#[derive(Debug, Clone, Copy)]
struct Case {
    layout: KvLayout,
    attn: Attention,
    style: RopeStyle,
    n_rot: usize,
    norm: bool,
    /// The token's position (may be past the cache: its K/V are dropped).
    at: u32,
    /// q, k, v in one buffer of `[q | k | v]` (the stacked product's), else one each.
    fused: bool,
}

/// Host inputs: the history rows (every position of the cache), q|k|v, weights, freqs.
#[derive(Debug)]
struct Inputs {
    hist: Vec<f32>,
    qkv: Vec<f32>,
    wq: Vec<f32>,
    wk: Vec<f32>,
    freqs: Vec<f32>,
}

impl Case {
    fn widths(&self) -> (usize, usize) {
        let hd = self.layout.head_dim;
        (self.attn.n_heads * hd, self.layout.n_kv_heads * hd)
    }

    fn inputs(&self, seed: u64) -> Inputs {
        let (qw, kw) = self.widths();
        let l = self.layout;
        let base = if seed & 1 == 0 { 10_000.0 } else { 1e6 };
        Inputs {
            hist: random_f32(2 * l.max_len * kw, seed),
            qkv: random_f32(qw + 2 * kw, seed ^ 1)
                .iter()
                .map(|x| x * 4.0)
                .collect(),
            wq: random_f32(l.head_dim, seed ^ 2),
            wk: random_f32(l.head_dim, seed ^ 3),
            freqs: rope_freqs(self.n_rot, base, 1.0, None),
        }
    }
}

/// What a run leaves: the output and both caches as words.
#[derive(Debug, PartialEq)]
struct Out {
    out: Vec<u32>,
    k: Vec<u32>,
    v: Vec<u32>,
    /// The caches before the token (the history alone).
    k0: Vec<u32>,
    v0: Vec<u32>,
}

/// Fills the cache with the history, then runs the folded op (`fused`: one op) or
/// head_norm_rope_kv then attention, and reads back.
fn run(gpu: &Gpu, case: &Case, inp: &Inputs, folded: bool) -> Result<Out, GpuError> {
    let l = case.layout;
    let hd = l.head_dim;
    let (qw, kw) = case.widths();
    let cache = KvCache::new(gpu, l)?;
    let ht = GpuTensor::from_f32(gpu, &[inp.hist.len()], &inp.hist);
    let hist_pos: Vec<u32> = (0..l.max_len as u32).collect();
    let hp = GpuTensor::from_u32(gpu, &[l.max_len], &hist_pos);
    let append = KvAppend {
        n_tokens: l.max_len,
        src_stride: 2 * kw,
    };
    // q|k|v at offset 1 in one buffer, or q, k, v at offsets 1, 2, 3 in three.
    let bufs: Vec<GpuTensor> = if case.fused {
        vec![GpuTensor::from_f32(
            gpu,
            &[qw + 2 * kw + 1],
            &[&[7.0], &inp.qkv[..]].concat(),
        )]
    } else {
        [(0, qw, 1), (qw, qw + kw, 2), (qw + kw, qw + 2 * kw, 3)]
            .map(|(a, b, pad)| {
                let v = [&vec![7.0; pad][..], &inp.qkv[a..b]].concat();
                GpuTensor::from_f32(gpu, &[v.len()], &v)
            })
            .into()
    };
    let (qv, kv_, vv) = if case.fused {
        let b = &bufs[0];
        (
            View::at(b, 1),
            View::at(b, 1 + qw),
            View::at(b, 1 + qw + kw),
        )
    } else {
        (
            View::at(&bufs[0], 1),
            View::at(&bufs[1], 2),
            View::at(&bufs[2], 3),
        )
    };
    let pt = GpuTensor::from_u32(gpu, &[2], &[0, case.at]);
    let pos = View::at(&pt, 1);
    let f = if inp.freqs.is_empty() {
        &[0.0][..]
    } else {
        &inp.freqs
    };
    let ft = GpuTensor::from_f32(gpu, &[f.len()], f);
    let wq = GpuTensor::from_f32(gpu, &[hd], &inp.wq);
    let wk = GpuTensor::from_f32(gpu, &[hd], &inp.wk);
    let n_out = qw;
    let out = GpuTensor::zeros(gpu, &[n_out + 2], Dtype::F32);
    let splits = GpuTensor::zeros(gpu, &[case.attn.splits_len(&l).max(1)], Dtype::U32);
    let words = l.words();
    let rb = Readback::new(gpu, (words.max(n_out) * 4) as u64);

    let mut b = StepBuilder::new();
    b.extend([append.op((&ht).into(), View::at(&ht, kw), (&hp).into(), &cache)?]);
    let mut step = b.build(gpu);
    let mut k0 = vec![0u32; words];
    rb.run_and_read(gpu, &mut step, &cache.k, 0, &mut k0)?;
    let mut v0 = vec![0u32; words];
    rb.read(gpu, &cache.v, 0, &mut v0)?;

    let ops = if folded {
        let op = AttentionRope {
            attn: case.attn,
            style: case.style,
            n_rot: case.n_rot,
            eps: 1e-6,
        };
        let rot = Rotate {
            k: kv_,
            v: vv,
            wq: case.norm.then_some(&wq),
            wk: case.norm.then_some(&wk),
            freqs: &ft,
        };
        op.ops(qv, rot, pos, &cache, View::at(&out, 2), Some(&splits))?
    } else {
        let hnr = HeadNormRope {
            style: case.style,
            head_dim: hd,
            n_rot: case.n_rot,
            n_tokens: 1,
            eps: 1e-6,
        };
        let heads = |x, n_heads, w| Heads {
            x,
            n_heads,
            stride: n_heads * hd,
            weight: case.norm.then_some(w),
        };
        let store = KvStore {
            v: vv,
            v_stride: kw,
            cache: &cache,
        };
        let mut ops = vec![hnr.op_kv(
            heads(qv, case.attn.n_heads, &wq),
            heads(kv_, l.n_kv_heads, &wk),
            store,
            pos,
            &ft,
        )?];
        ops.extend(
            case.attn
                .ops(qv, pos, &cache, View::at(&out, 2), Some(&splits))?,
        );
        ops
    };
    let mut b = StepBuilder::new();
    b.extend(ops);
    let mut step = b.build(gpu);
    let mut o = vec![0u32; n_out];
    rb.run_and_read(gpu, &mut step, &out, 2, &mut o)?;
    let mut k = vec![0u32; words];
    rb.read(gpu, &cache.k, 0, &mut k)?;
    let mut v = vec![0u32; words];
    rb.read(gpu, &cache.v, 0, &mut v)?;
    Ok(Out {
        out: o,
        k,
        v,
        k0,
        v0,
    })
}

fn random_case(rng: &mut Rng) -> Case {
    let head_dim = rng.pick(&attention::HEAD_DIMS);
    let n_kv_heads = rng.range(1, 3);
    let n_heads = n_kv_heads * rng.range(1, 9);
    let max_len = rng.range(8, 160);
    let at = if rng.range(0, 8) == 0 {
        (max_len + rng.range(0, 50)) as u32
    } else {
        rng.range(0, max_len) as u32
    };
    Case {
        layout: KvLayout {
            dtype: rng.pick(&[KvDtype::F32, KvDtype::F16]),
            n_kv_heads,
            head_dim,
            max_len,
        },
        attn: Attention {
            n_tokens: 1,
            n_heads,
            q_stride: n_heads * head_dim,
            scale: if rng.bool() {
                1.0 / (head_dim as f32).sqrt()
            } else {
                1.0
            },
            softcap: if rng.bool() { 0.0 } else { 30.0 },
            // Past the cache, no window (the attention's reference takes keys below the
            // position only).
            window: if rng.bool() || at as usize >= max_len {
                0
            } else {
                rng.range(1, max_len + 8)
            },
            split_len: rng.pick(&[16, 32, 48, max_len]),
        },
        style: rng.pick(&[RopeStyle::Normal, RopeStyle::Neox]),
        n_rot: if rng.bool() {
            head_dim
        } else {
            2 * rng.range(0, head_dim / 2)
        },
        norm: rng.bool(),
        at,
        fused: rng.bool(),
    }
}

fn parity_case(gpu: &Gpu, rng: &mut Rng) -> Result<Compare, GpuError> {
    let case = random_case(rng);
    let inp = case.inputs(rng.next_u64());
    let got = run(gpu, &case, &inp, true)?;
    Ok(compare(&case, &inp, &got))
}

/// The GPU's output and caches against head_norm_rope's reference for q and k, kv_append's
/// for the cache and attention's over the cache as read back.
fn compare(case: &Case, inp: &Inputs, got: &Out) -> Compare {
    let l = case.layout;
    let hd = l.head_dim;
    let (qw, kw) = case.widths();
    let op = HeadNormRope {
        style: case.style,
        head_dim: hd,
        n_rot: case.n_rot,
        n_tokens: 1,
        eps: 1e-6,
    };
    let mut q = inp.qkv[..qw].to_vec();
    let mut k = inp.qkv[qw..qw + kw].to_vec();
    let v = &inp.qkv[qw + kw..];
    let mut qb = vec![0.0; qw];
    let mut kb = vec![0.0; kw];
    for (x, n_heads, w, b) in [
        (&mut q, case.attn.n_heads, &inp.wq, &mut qb),
        (&mut k, l.n_kv_heads, &inp.wk, &mut kb),
    ] {
        let h = HostHeads {
            x,
            n_heads,
            stride: n_heads * hd,
            weight: case.norm.then_some(&w[..]),
        };
        op.reference_bounds(h, &[case.at], &inp.freqs, b);
    }
    let append = KvAppend {
        n_tokens: 1,
        src_stride: kw,
    };
    let mut want = HostKv {
        layout: l,
        k: l.decode(&got.k0),
        v: l.decode(&got.v0),
    };
    append.reference(&k, v, &[case.at], &mut want);
    let mut bound: HostKv<f64> = HostKv::zeros(l);
    append.reference(&kb, &vec![0.0; kw], &[case.at], &mut bound);
    let at = case.at as usize;

    let mut c = Compare::default();
    for (which, words, want, bound) in [
        ("K", &got.k, &want.k, &bound.k),
        ("V", &got.v, &want.v, &bound.v),
    ] {
        for (i, ((&g, &w), &e)) in l.decode(words).iter().zip(want).zip(bound).enumerate() {
            let p = i / hd % l.max_len;
            // Untouched positions exact; the new one as head_norm_rope_kv's bound.
            let e = if p == at {
                e * (1.0 + 2f64.powi(-10)) + store_bound(l.dtype, w)
            } else {
                0.0
            };
            c.add(f64::from(g), f64::from(w), e, || {
                format!(
                    "{case:?} {which} cache head {} pos {p} dim {}",
                    i / hd / l.max_len,
                    i % hd
                )
            });
        }
    }
    let arith = Arith {
        q_err: Some(&qb),
        p_f16: false,
        combines: 0,
    };
    let r = case.attn.reference_with(
        &l,
        &q,
        arith,
        &l.decode(&got.k),
        &l.decode(&got.v),
        &[case.at],
    );
    for (i, (&g, &w)) in got.out.iter().zip(&r.out).enumerate() {
        c.add(f64::from(f32::from_bits(g)), w, r.bound[i / hd], || {
            format!("{case:?}: out head {} dim {}", i / hd, i % hd)
        });
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil;

    #[test]
    fn attention_rope_matches_reference() {
        testutil::parity("attention_rope", 12, 131);
    }

    /// The folded op leaves the output and the caches bit for bit as head_norm_rope_kv then
    /// attention do, at the models' shapes: Gemma 3 (4 q heads, 1 kv head, 256, NeoX, norms),
    /// Qwen 2.5 0.5B (14, 2, 64, NeoX), SmolLM2 (9, 3, 64, normal), partial rotaries with
    /// and without norms (128, 32 dims, both pairings; GQA 8 over 2: several tiles of a kv
    /// head store its k); f16 and f32 caches; one split, and splits of 16 (the position's
    /// split among many). Except where the hook in registers norms ([`in_lanes`] with
    /// norms): its sums of squares run in another order than head_norm_rope's, so there the
    /// k head at the position and the output may differ by rounding; v, every other cache
    /// position and the bound against the reference still hold.
    #[test]
    fn equals_head_norm_rope_kv_then_attention() {
        let Some(gpu) = testutil::gpu() else { return };
        let shapes = [
            (RopeStyle::Neox, 256, 256, 4, 1, true),
            (RopeStyle::Neox, 64, 64, 14, 2, false),
            (RopeStyle::Normal, 64, 64, 9, 3, false),
            (RopeStyle::Normal, 128, 32, 16, 2, true),
            (RopeStyle::Normal, 128, 32, 16, 2, false),
            (RopeStyle::Neox, 128, 32, 16, 2, true),
        ];
        for (style, head_dim, n_rot, n_heads, n_kv_heads, norm) in shapes {
            for dtype in [KvDtype::F16, KvDtype::F32] {
                for (split_len, at, fused) in [(48, 37, true), (16, 37, false), (16, 5, true)] {
                    let case = Case {
                        layout: KvLayout {
                            dtype,
                            n_kv_heads,
                            head_dim,
                            max_len: 48,
                        },
                        attn: Attention {
                            n_tokens: 1,
                            n_heads,
                            q_stride: n_heads * head_dim,
                            scale: 1.0 / (head_dim as f32).sqrt(),
                            softcap: 0.0,
                            window: 0,
                            split_len,
                        },
                        style,
                        n_rot,
                        norm,
                        at,
                        fused,
                    };
                    let inp = case.inputs(0xa77 ^ (head_dim * n_heads) as u64);
                    let one = run(gpu, &case, &inp, true).unwrap();
                    let two = run(gpu, &case, &inp, false).unwrap();
                    assert!(one.v == two.v, "{case:?}: the v caches differ");
                    if norm && in_lanes(style, n_rot, head_dim) {
                        // The k cache's words at every other position.
                        let l = case.layout;
                        let per_pos = l.words() / (l.n_kv_heads * l.max_len);
                        let other = |k: &[u32]| -> Vec<u32> {
                            let p = |i: usize| i / per_pos % l.max_len;
                            let kept = k.iter().enumerate().filter(|&(i, _)| p(i) != at as usize);
                            kept.map(|(_, &w)| w).collect()
                        };
                        assert!(other(&one.k) == other(&two.k), "{case:?}: k elsewhere");
                        assert!(compare(&case, &inp, &two).max_ratio <= 1.0);
                    } else {
                        assert!(one.k == two.k, "{case:?}: the k caches differ");
                        assert!(one.out == two.out, "{case:?}: the output differs");
                    }
                    let c = compare(&case, &inp, &one);
                    assert!(c.max_ratio <= 1.0, "{}", c.worst);
                }
            }
        }
    }
}
