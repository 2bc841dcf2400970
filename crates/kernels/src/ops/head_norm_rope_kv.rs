//! `head_norm_rope` with `kv_append` folded in: q and k normed (where they carry weights) and
//! rotated in place as the plain kernel does, then each k workgroup stores its finished head
//! into the layer's KV cache at the token's position, with the same token's v head copied
//! unchanged beside it (no architecture here transforms v before attention: Gemma 3 norms q
//! and k, Llama and Qwen 2 only rotate them). A decode step of a small model is bound by its
//! number of dispatches, and this is one fewer a layer.
//!
//! WGSL: the plain kernel's files (`rope/head_norm_rope.wgsl`, `norm/reduce.wgsl`) with the
//! k-head hooks of `rope/kv_cache.wgsl` in place of `rope/kv_none.wgsl`, and kv_append's
//! store (`attention/kv_store_<dtype>.wgsl`). The rotation is the plain kernel's code and the
//! store kv_append's, so the cache holds what `head_norm_rope` then `kv_append` store, bit for
//! bit (the test `cache_equals_head_norm_rope_then_kv_append`).

use crate::device::Gpu;
use crate::error::GpuError;
use crate::op::Op;
use crate::ops::head_norm_rope::{HeadNormRope, Heads, HostHeads};
use crate::ops::kv::{HostKv, KvAppend, KvCache, KvDtype, KvLayout, store_bound};
use crate::ops::rope::{RopeStyle, rope_freqs};
use crate::parity::data::{Rng, random_f32};
use crate::parity::{Check, Compare};
use crate::readback::Readback;
use crate::shader::{BindingKind, ShaderFile, shader_file};
use crate::step::StepBuilder;
use crate::tensor::{GpuTensor, View};

/// The k-head hooks that store into a cache.
pub(crate) static HOOKS: ShaderFile = shader_file!("rope/kv_cache.wgsl");

/// The plain kernel's bindings, then v, the K cache and the V cache. v is bound read-write
/// though only read: in decode it shares one buffer with q and k (the stacked q|k|v product),
/// which are written, and wgpu refuses a buffer bound both read-only and writable in one
/// dispatch.
pub(crate) const BINDINGS: &[BindingKind] = &[
    BindingKind::Uniform,
    BindingKind::StorageReadWrite,
    BindingKind::StorageReadWrite,
    BindingKind::StorageRead,
    BindingKind::StorageRead,
    BindingKind::StorageRead,
    BindingKind::StorageRead,
    BindingKind::StorageReadWrite,
    BindingKind::StorageReadWrite,
    BindingKind::StorageReadWrite,
];

/// Where the finished heads go: the layer's cache (whose heads are k's), and the v heads
/// stored beside them unchanged: token t's head h at `v.offset + t * v_stride + h * head_dim`.
#[derive(Debug, Clone, Copy)]
pub struct KvStore<'a> {
    pub v: View<'a>,
    pub v_stride: usize,
    pub cache: &'a KvCache,
}

impl KvStore<'_> {
    /// k is given, with the cache's head count and head_dim; v's rows lie in its view.
    pub(crate) fn check(&self, op: HeadNormRope, k: Option<Heads<'_>>) -> Result<(), GpuError> {
        let l = self.cache.layout;
        let Some(k) = k else {
            return Err(op.shape_error("a KV cache store needs k heads".into()));
        };
        if k.n_heads != l.n_kv_heads || l.head_dim != op.head_dim {
            return Err(op.shape_error(format!(
                "{} k heads of {} into a cache of {} heads of {}",
                k.n_heads, op.head_dim, l.n_kv_heads, l.head_dim
            )));
        }
        let row = l.n_kv_heads * l.head_dim;
        if self.v_stride < row {
            return Err(op.shape_error(format!("v stride {} < {row}", self.v_stride)));
        }
        if op.n_tokens > 0 {
            let len = (op.n_tokens - 1) * self.v_stride + row;
            self.v.check("head_norm_rope v", len)?;
        }
        Ok(())
    }
}

impl HeadNormRope {
    /// [`HeadNormRope::op`] over q and k, then token t's finished k heads and `kv`'s v heads
    /// stored at position `pos[pos.offset + t]` of `kv.cache` (what [`KvAppend`] stores from
    /// them; positions past the cache are dropped), in one dispatch.
    pub fn op_kv(
        self,
        q: Heads<'_>,
        k: Heads<'_>,
        kv: KvStore<'_>,
        pos: View<'_>,
        freqs: &GpuTensor,
    ) -> Result<Op, GpuError> {
        self.build(q, Some(k), Some(kv), pos, freqs)
    }
}

/// Tolerance: q and k as `head_norm_rope` (the same code); the K cache that bound, grown by
/// the f16 rounding of the value it bounds (1 + 2^-10), plus kv_append's (f32 exact; f16 one
/// ulp); the V cache kv_append's; positions not written and everything outside the heads
/// untouched.
pub const CHECK: Check = Check {
    name: "head_norm_rope_kv",
    tolerance: "q,k as head_norm_rope; K that*(1+2^-10) + kv_append's; V kv_append's",
    case: parity_case,
};

/// A case: `n_kv_heads` k heads (the cache's) for `q_heads` q heads, the cache's type and
/// length, and the layout of q, k and v.
#[derive(Debug, Clone, Copy)]
struct Case {
    op: HeadNormRope,
    /// `head_dim` is the op's; `n_kv_heads` k's and v's head count.
    cache: KvLayout,
    q_heads: usize,
    norm: bool,
    /// q, k and v in one buffer of `[q | k | v | pad]` rows (the stacked product's), else a
    /// buffer each of `[x | pad]` rows.
    fused: bool,
    pad: usize,
}

/// Where one of q, k, v lies: its buffer, first element and token stride.
#[derive(Debug, Clone, Copy)]
struct Place {
    buf: usize,
    offset: usize,
    stride: usize,
}

impl Case {
    /// q, k, v (k and v always with one stride, as kv_append reads them).
    fn places(&self) -> [Place; 3] {
        let hd = self.op.head_dim;
        let (qw, kw) = (self.q_heads * hd, self.cache.n_kv_heads * hd);
        if self.fused {
            let stride = qw + 2 * kw + self.pad;
            let at = |offset| Place {
                buf: 0,
                offset,
                stride,
            };
            [at(1), at(1 + qw), at(1 + qw + kw)]
        } else {
            let (qs, ks) = (qw + self.pad, kw + self.pad);
            [(0, 1, qs), (1, 2, ks), (2, 3, ks)].map(|(buf, offset, stride)| Place {
                buf,
                offset,
                stride,
            })
        }
    }

    fn buffer_lens(&self) -> Vec<usize> {
        let mut lens = vec![0; if self.fused { 1 } else { 3 }];
        for p in self.places() {
            lens[p.buf] = lens[p.buf].max(p.offset + self.op.n_tokens * p.stride);
        }
        lens
    }
}

/// A case's host inputs: the activation buffers, norm weights, positions and frequencies.
#[derive(Debug)]
struct Inputs {
    bufs: Vec<Vec<f32>>,
    wq: Vec<f32>,
    wk: Vec<f32>,
    pos: Vec<u32>,
    freqs: Vec<f32>,
}

fn inputs(case: &Case, seed: u64) -> Inputs {
    let (hd, n) = (case.op.head_dim, case.op.n_tokens);
    let bufs = (0u64..)
        .zip(case.buffer_lens())
        .map(|(i, len)| random_f32(len, seed ^ (i + 1)))
        .collect();
    let mut rng = Rng::new(seed ^ 0x70);
    let max_len = case.cache.max_len;
    let mut pos: Vec<u32> = Vec::new();
    while pos.len() < n {
        let p = rng.range(0, max_len) as u32;
        if !pos.contains(&p) {
            pos.push(p);
        }
    }
    // Now and then a position past the cache: its rows are dropped (q and k still turn);
    // never the only token's, so every case stores something.
    if n > 1 && rng.range(0, 4) == 0 {
        pos[n - 1] = (max_len + rng.range(0, 4000)) as u32;
    }
    let base = if seed & 1 == 0 { 10_000.0 } else { 1e6 };
    Inputs {
        bufs,
        wq: random_f32(hd, seed ^ 0x10),
        wk: random_f32(hd, seed ^ 0x11),
        pos,
        freqs: rope_freqs(case.op.n_rot, base, 1.0, None),
    }
}

/// What a run leaves: the activation buffers and the caches, as words.
#[derive(Debug, PartialEq)]
struct Out {
    bufs: Vec<Vec<u32>>,
    k: Vec<u32>,
    v: Vec<u32>,
}

/// Runs `case` on `inp` through the fused op, or (`fused` false) head_norm_rope then
/// kv_append, in one step.
fn run(gpu: &Gpu, case: &Case, inp: &Inputs, fused: bool) -> Result<Out, GpuError> {
    let t: Vec<GpuTensor> = inp
        .bufs
        .iter()
        .map(|b| GpuTensor::from_f32(gpu, &[b.len()], b))
        .collect();
    let n = case.op.n_tokens;
    // The positions at offset 1 (a step's ids slot need not start its buffer).
    let pt = GpuTensor::from_u32(gpu, &[n + 1], &[&[0], &inp.pos[..]].concat());
    // n_rot = 0 has no frequencies; a buffer still needs an element.
    let f = if inp.freqs.is_empty() {
        &[0.0][..]
    } else {
        &inp.freqs
    };
    let ft = GpuTensor::from_f32(gpu, &[f.len()], f);
    let hd = case.op.head_dim;
    let wq = GpuTensor::from_f32(gpu, &[hd], &inp.wq);
    let wk = GpuTensor::from_f32(gpu, &[hd], &inp.wk);
    let cache = KvCache::new(gpu, case.cache)?;
    let [qp, kp, vp] = case.places();
    let view = |p: Place| View::at(&t[p.buf], p.offset);
    let heads = |p: Place, n_heads, w| Heads {
        x: view(p),
        n_heads,
        stride: p.stride,
        weight: case.norm.then_some(w),
    };
    let q = heads(qp, case.q_heads, &wq);
    let k = heads(kp, case.cache.n_kv_heads, &wk);
    let pos = View::at(&pt, 1);
    let ops = if fused {
        let kv = KvStore {
            v: view(vp),
            v_stride: vp.stride,
            cache: &cache,
        };
        vec![case.op.op_kv(q, k, kv, pos, &ft)?]
    } else {
        let append = KvAppend {
            n_tokens: n,
            src_stride: kp.stride,
        };
        vec![
            case.op.op(q, Some(k), pos, &ft)?,
            append.op(view(kp), view(vp), pos, &cache)?,
        ]
    };
    let mut b = StepBuilder::new();
    b.extend(ops);
    let mut step = b.build(gpu);
    let words = case.cache.words();
    let largest = inp.bufs.iter().map(Vec::len).max().unwrap_or(0).max(words);
    let rb = Readback::new(gpu, (largest * 4) as u64);
    let mut k_words = vec![0u32; words];
    rb.run_and_read(gpu, &mut step, &cache.k, 0, &mut k_words)?;
    let mut v_words = vec![0u32; words];
    rb.read(gpu, &cache.v, 0, &mut v_words)?;
    let mut bufs = Vec::new();
    for (tensor, host) in t.iter().zip(&inp.bufs) {
        let mut out = vec![0u32; host.len()];
        rb.read(gpu, tensor, 0, &mut out)?;
        bufs.push(out);
    }
    Ok(Out {
        bufs,
        k: k_words,
        v: v_words,
    })
}

fn random_case(rng: &mut Rng) -> Case {
    let head_dim = if rng.range(0, 4) < 3 {
        rng.pick(&[64, 128, 256])
    } else {
        2 * rng.range(1, 257)
    };
    let n_rot = if rng.bool() {
        head_dim
    } else {
        2 * rng.range(0, head_dim / 2)
    };
    let style = if rng.bool() {
        RopeStyle::Neox
    } else {
        RopeStyle::Normal
    };
    let dtype = if rng.bool() {
        KvDtype::F16
    } else {
        KvDtype::F32
    };
    let n_tokens = rng.range(1, 5);
    let n_kv_heads = rng.range(1, 4);
    Case {
        op: HeadNormRope {
            style,
            head_dim,
            n_rot,
            n_tokens,
            eps: 1e-6,
        },
        cache: KvLayout {
            dtype,
            n_kv_heads,
            head_dim,
            max_len: rng.range(n_tokens + 1, 40),
        },
        // Grouped-query attention: fewer kv heads than q heads.
        q_heads: n_kv_heads * rng.range(2, 5),
        norm: rng.bool(),
        fused: rng.bool(),
        pad: rng.range(0, 3),
    }
}

fn parity_case(gpu: &Gpu, rng: &mut Rng) -> Result<Compare, GpuError> {
    let case = random_case(rng);
    let inp = inputs(&case, rng.next_u64());
    let got = run(gpu, &case, &inp, true)?;
    Ok(compare(&case, &inp, &got))
}

/// The GPU's buffers and caches against head_norm_rope's reference over q and k, then
/// kv_append's over the finished k and v (each value's bound moved with it).
fn compare(case: &Case, inp: &Inputs, got: &Out) -> Compare {
    let mut want = inp.bufs.clone();
    // 0: must be exact (v, padding, anything outside the heads).
    let mut bound: Vec<Vec<f64>> = want.iter().map(|b| vec![0.0; b.len()]).collect();
    let [qp, kp, vp] = case.places();
    for (p, n_heads, w) in [
        (qp, case.q_heads, &inp.wq),
        (kp, case.cache.n_kv_heads, &inp.wk),
    ] {
        let h = HostHeads {
            x: &mut want[p.buf][p.offset..],
            n_heads,
            stride: p.stride,
            weight: case.norm.then_some(&w[..]),
        };
        let b = &mut bound[p.buf][p.offset..];
        case.op.reference_bounds(h, &inp.pos, &inp.freqs, b);
    }
    let append = KvAppend {
        n_tokens: case.op.n_tokens,
        src_stride: kp.stride,
    };
    let mut cache: HostKv = HostKv::zeros(case.cache);
    let (k, v) = (&want[kp.buf][kp.offset..], &want[vp.buf][vp.offset..]);
    append.reference(k, v, &inp.pos, &mut cache);
    let mut cache_bound: HostKv<f64> = HostKv::zeros(case.cache);
    let (k, v) = (&bound[kp.buf][kp.offset..], &bound[vp.buf][vp.offset..]);
    append.reference(k, v, &inp.pos, &mut cache_bound);

    let mut c = Compare::default();
    for (b, ((got, want), bound)) in got.bufs.iter().zip(&want).zip(&bound).enumerate() {
        for (i, ((&g, &w), &e)) in got.iter().zip(want).zip(bound).enumerate() {
            let g = f64::from(f32::from_bits(g));
            c.add(g, f64::from(w), e, || {
                format!("{case:?} buffer {b} elem {i}")
            });
        }
    }
    let l = case.cache;
    for (which, words, want, bound) in [
        ("K", &got.k, &cache.k, &cache_bound.k),
        ("V", &got.v, &cache.v, &cache_bound.v),
    ] {
        let cached = l.decode(words);
        for (i, ((&g, &w), &e)) in cached.iter().zip(want).zip(bound).enumerate() {
            let e = e * (1.0 + 2f64.powi(-10)) + store_bound(l.dtype, w);
            c.add(f64::from(g), f64::from(w), e, || {
                let (h, p, d) = (
                    i / l.head_dim / l.max_len,
                    i / l.head_dim % l.max_len,
                    i % l.head_dim,
                );
                format!("{case:?} {which} cache head {h} pos {p} dim {d}")
            });
        }
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil;

    #[test]
    fn head_norm_rope_kv_matches_reference() {
        testutil::parity("head_norm_rope_kv", 12, 97);
    }

    /// The fused op leaves the buffers and caches bit for bit as head_norm_rope then
    /// kv_append do (the model's logits then cannot change), at the models' shapes: Gemma 3
    /// (4 q heads, 1 kv head, 256, NeoX, norms), Qwen 2.5 0.5B (14, 2, 64, NeoX, no norms),
    /// SmolLM2 (9, 3, 64, normal, no norms), and a partial rotary with norms; f16 and f32
    /// caches; 1 token and 5; fused qkv rows and separate buffers.
    #[test]
    fn cache_equals_head_norm_rope_then_kv_append() {
        let Some(gpu) = testutil::gpu() else { return };
        let shapes = [
            (RopeStyle::Neox, 256, 256, 4, 1, true),
            (RopeStyle::Neox, 64, 64, 14, 2, false),
            (RopeStyle::Normal, 64, 64, 9, 3, false),
            (RopeStyle::Normal, 128, 32, 4, 2, true),
        ];
        for (style, head_dim, n_rot, q_heads, n_kv_heads, norm) in shapes {
            for dtype in [KvDtype::F16, KvDtype::F32] {
                for (n_tokens, fused) in [(1, true), (1, false), (5, true), (5, false)] {
                    let case = Case {
                        op: HeadNormRope {
                            style,
                            head_dim,
                            n_rot,
                            n_tokens,
                            eps: 1e-6,
                        },
                        cache: KvLayout {
                            dtype,
                            n_kv_heads,
                            head_dim,
                            max_len: 24,
                        },
                        q_heads,
                        norm,
                        fused,
                        pad: 1,
                    };
                    let inp = inputs(&case, 0x5eed ^ (head_dim * n_tokens) as u64);
                    let one = run(gpu, &case, &inp, true).unwrap();
                    let two = run(gpu, &case, &inp, false).unwrap();
                    assert!(one == two, "{case:?}: the fused op differs");
                    // And both are right.
                    let c = compare(&case, &inp, &one);
                    assert!(c.max_ratio <= 1.0, "{}", c.worst);
                }
            }
        }
    }
}
