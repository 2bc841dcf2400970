//! head_norm_rope's CPU reference with its error bound, and the parity machinery of both of
//! its variants: a case (q, k and v heads in fused rows or buffers of their own, with or
//! without a cache) is drawn, run and compared here for head_norm_rope's check and
//! head_norm_rope_kv's ([`crate::ops::head_norm_rope_kv`]).

use super::*;
use crate::device::Gpu;
use crate::ops::kv::{HostKv, KvAppend, KvCache, KvLayout, store_bound};
use crate::ops::rope::rope_freqs;
use crate::parity::data::{Rng, random_f32};
use crate::parity::{Check, Compare, U};
use crate::readback::Readback;
use crate::step::StepBuilder;

/// [`Heads`] on the host (the reference's input): `x` starts at the view's offset.
#[derive(Debug)]
pub struct HostHeads<'a> {
    /// The heads' values, normed and rotated in place.
    pub x: &'a mut [f32],
    /// Heads per token.
    pub n_heads: usize,
    /// Elements from one token's heads to the next's.
    pub stride: usize,
    /// The per-head norm's gains, `head_dim` of them; `None`: no norm.
    pub weight: Option<&'a [f32]>,
}

impl HeadNormRope {
    /// CPU reference: norms and rotates every head of `h` (norm in f64, then the rotation in
    /// f64 from the same f32 frequencies, as [`crate::ops::rope::Rope::reference`]).
    pub fn reference(self, h: HostHeads<'_>, pos: &[u32], freqs: &[f32]) {
        for (t, &p) in pos.iter().enumerate().take(self.n_tokens) {
            for head in 0..h.n_heads {
                let start = t * h.stride + head * self.head_dim;
                let x = &mut h.x[start..start + self.head_dim];
                self.head_ref(x, h.weight, p, freqs);
            }
        }
    }

    /// [`HeadNormRope::reference`], and each element's bound (see [`CHECK`]) into `bound`,
    /// indexed as `h.x` (elements outside the heads keep theirs).
    pub(crate) fn reference_bounds(
        self,
        h: HostHeads<'_>,
        pos: &[u32],
        freqs: &[f32],
        bound: &mut [f64],
    ) {
        for (t, &p) in pos.iter().enumerate().take(self.n_tokens) {
            for head in 0..h.n_heads {
                let start = t * h.stride + head * self.head_dim;
                let x = &mut h.x[start..start + self.head_dim];
                let normed = self.head_ref(x, h.weight, p, freqs);
                let norm = h.weight.is_some();
                head_bounds(self, norm, &normed, p, freqs, x, &mut bound[start..]);
            }
        }
    }

    /// One head; returns the normed values (the rotation's input, in f64).
    fn head_ref(self, x: &mut [f32], weight: Option<&[f32]>, pos: u32, freqs: &[f32]) -> Vec<f64> {
        let mut v: Vec<f64> = x.iter().map(|&e| f64::from(e)).collect();
        if let Some(w) = weight {
            let ss: f64 = v.iter().map(|e| e * e).sum();
            let r = 1.0 / (ss / v.len() as f64 + f64::from(self.eps)).sqrt();
            for (e, &g) in v.iter_mut().zip(w) {
                *e *= r * f64::from(g);
            }
        }
        let half = self.n_rot / 2;
        let mut out = v.clone();
        for (i, &f) in freqs.iter().enumerate().take(half) {
            let (s, c) = (f64::from(pos) * f64::from(f)).sin_cos();
            let (j0, j1) = self.style.pair(i, half);
            out[j0] = v[j0] * c - v[j1] * s;
            out[j1] = v[j0] * s + v[j1] * c;
        }
        for (e, o) in x.iter_mut().zip(&out) {
            *e = *o as f32;
        }
        v
    }
}

/// The bounds of one head's elements (see [`CHECK`]); `out` is the reference result.
fn head_bounds(
    op: HeadNormRope,
    norm: bool,
    normed: &[f64],
    pos: u32,
    freqs: &[f32],
    out: &[f32],
    bound: &mut [f64],
) {
    let half = op.n_rot / 2;
    let norm_u = if norm {
        (op.head_dim / 2 + 8) as f64 * U
    } else {
        0.0
    };
    for (j, &r) in out.iter().enumerate() {
        bound[j] = norm_u * f64::from(r.abs());
    }
    for (i, &f) in freqs.iter().enumerate().take(half) {
        let (j0, j1) = op.style.pair(i, half);
        let angle = f64::from(pos) * f64::from(f);
        let b = (normed[j0].abs() + normed[j1].abs())
            * (2f64.powi(-11) + angle * 2f64.powi(-23) + norm_u);
        bound[j0] = b;
        bound[j1] = b;
    }
}

/// Tolerance, per rotated pair: `(|x0| + |x1|) * (2^-11 + |angle| * 2^-23 + (hd/2 + 8) u)`
/// with x0, x1 the (reference) normed values: rope's bound (Vulkan's sin/cos to 2^-11
/// absolute; the f32 angle pos * freq off by |angle| * 2^-24) plus rms_norm's on the rotation's
/// inputs, which the rotation carries (|c|, |s| <= 1). Unrotated dims: rms_norm's bound
/// `(hd/2 + 8) u |ref|` with the norm, exact without. Everything outside the heads (v in fused
/// rows, padding) must stay untouched.
pub const CHECK: Check = Check {
    name: "head_norm_rope",
    tolerance: "(|x0|+|x1|)*(2^-11+|angle|*2^-23+(hd/2+8)u)",
    case: parity_case,
};

fn parity_case(gpu: &Gpu, rng: &mut Rng) -> Result<Compare, GpuError> {
    let op = Case::random_op(rng);
    let case = Case {
        op,
        q_heads: rng.range(1, 6),
        k_heads: rng.range(0, 3),
        norm: rng.bool(),
        fused: rng.bool(),
        pad: rng.range(0, 3),
        cache: None,
    };
    let inp = case.inputs(rng.next_u64());
    Ok(case.compare(&inp, &case.run(gpu, &inp, true)?))
}

/// The frequencies of a case's `n_rot` dims: base 10^4 or 10^6 by the seed's parity.
pub(crate) fn random_freqs(n_rot: usize, seed: u64) -> Vec<f32> {
    let base = if seed & 1 == 0 { 10_000.0 } else { 1e6 };
    rope_freqs(n_rot, base, 1.0, None)
}

/// `freqs` on the GPU (n_rot = 0 has no frequencies; a buffer still needs an element).
pub(crate) fn freqs_tensor(gpu: &Gpu, freqs: &[f32]) -> GpuTensor {
    let f = if freqs.is_empty() { &[0.0][..] } else { freqs };
    GpuTensor::from_f32(gpu, &[f.len()], f)
}

/// A case of either variant: q heads and k heads (0: q alone, without a cache only) of one
/// op, normed or not, in one buffer of `[q | k | v | pad]` rows (the stacked product's) or a
/// buffer each of `[x | pad]` rows (v's only with a cache); with `cache`, the finished k heads
/// and the v heads stored into it (its `n_kv_heads` is then `k_heads`, its head_dim the op's).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Case {
    pub op: HeadNormRope,
    pub q_heads: usize,
    pub k_heads: usize,
    pub norm: bool,
    pub fused: bool,
    /// Extra elements at the end of each row.
    pub pad: usize,
    pub cache: Option<KvLayout>,
}

/// Where one of q, k, v lies: its buffer, first element and token stride.
#[derive(Debug, Clone, Copy)]
struct Place {
    buf: usize,
    offset: usize,
    stride: usize,
}

/// A case's host inputs: the activation buffers, norm weights, positions and frequencies.
#[derive(Debug)]
pub(crate) struct Inputs {
    bufs: Vec<Vec<f32>>,
    wq: Vec<f32>,
    wk: Vec<f32>,
    pos: Vec<u32>,
    freqs: Vec<f32>,
}

/// What a run leaves: the activation buffers and the caches (empty without one), as words.
#[derive(Debug, PartialEq)]
pub(crate) struct Out {
    bufs: Vec<Vec<u32>>,
    k: Vec<u32>,
    v: Vec<u32>,
}

/// A model's heads: rotation, head_dim, dims rotated, q heads, k heads, q/k norms.
#[cfg(test)]
pub(crate) type Shape = (RopeStyle, usize, usize, usize, usize, bool);

impl Case {
    /// `n_tokens` tokens of a model's heads (eps 1e-6), fused rows or not, no padding, no
    /// cache.
    #[cfg(test)]
    pub(crate) fn of_shape(shape: Shape, n_tokens: usize, fused: bool) -> Case {
        let (style, head_dim, n_rot, q_heads, k_heads, norm) = shape;
        Case {
            op: HeadNormRope {
                style,
                head_dim,
                n_rot,
                n_tokens,
                eps: 1e-6,
            },
            q_heads,
            k_heads,
            norm,
            fused,
            pad: 0,
            cache: None,
        }
    }

    /// A random op of 1 to 4 tokens: head_dim mostly a model's (64, 128, 256), else any even
    /// one up to 512; the whole head rotated or an even part of it; either pairing.
    pub(crate) fn random_op(rng: &mut Rng) -> HeadNormRope {
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
        let style = rng.pick(&[RopeStyle::Normal, RopeStyle::Neox]);
        HeadNormRope {
            style,
            head_dim,
            n_rot,
            n_tokens: rng.range(1, 5),
            eps: 1e-6,
        }
    }

    /// q, k, v (k and v always with one stride, as kv_append reads them).
    fn places(&self) -> [Place; 3] {
        let hd = self.op.head_dim;
        let (qw, kw) = (self.q_heads * hd, self.k_heads * hd);
        if self.fused {
            let stride = qw + 2 * kw + self.pad;
            [1, 1 + qw, 1 + qw + kw].map(|offset| Place {
                buf: 0,
                offset,
                stride,
            })
        } else {
            let (qs, ks) = (qw + self.pad, kw + self.pad);
            [(0, 1, qs), (1, 2, ks), (2, 3, ks)].map(|(buf, offset, stride)| Place {
                buf,
                offset,
                stride,
            })
        }
    }

    /// The buffers' lengths: every place's rows (v's only with a cache).
    fn buffer_lens(&self) -> Vec<usize> {
        let used = if self.cache.is_some() { 3 } else { 2 };
        let places = self.places();
        let mut lens = vec![0; if self.fused { 1 } else { used }];
        for p in &places[..used] {
            lens[p.buf] = lens[p.buf].max(p.offset + self.op.n_tokens * p.stride);
        }
        lens
    }

    /// Random inputs: with a cache, distinct positions in it (now and then the last token's
    /// past it: its rows are dropped, q and k still turn); without, any below 5000.
    pub(crate) fn inputs(&self, seed: u64) -> Inputs {
        let (hd, n) = (self.op.head_dim, self.op.n_tokens);
        let bufs = (0u64..)
            .zip(self.buffer_lens())
            .map(|(i, len)| random_f32(len, seed ^ (i + 1)))
            .collect();
        let mut rng = Rng::new(seed ^ 0x70);
        let max_len = self.cache.map_or(5000, |c| c.max_len);
        let mut pos: Vec<u32> = Vec::new();
        while pos.len() < n {
            let p = rng.range(0, max_len) as u32;
            if self.cache.is_none() || !pos.contains(&p) {
                pos.push(p);
            }
        }
        if self.cache.is_some() && n > 1 && rng.range(0, 4) == 0 {
            pos[n - 1] = (max_len + rng.range(0, 4000)) as u32;
        }
        Inputs {
            bufs,
            wq: random_f32(hd, seed ^ 0x10),
            wk: random_f32(hd, seed ^ 0x11),
            pos,
            freqs: random_freqs(self.op.n_rot, seed),
        }
    }

    /// Runs the case on `inp` in one step: without a cache the op; with one the fused op
    /// (`fused`), or head_norm_rope then kv_append.
    pub(crate) fn run(&self, gpu: &Gpu, inp: &Inputs, fused: bool) -> Result<Out, GpuError> {
        let t: Vec<GpuTensor> = inp
            .bufs
            .iter()
            .map(|b| GpuTensor::from_f32(gpu, &[b.len()], b))
            .collect();
        let n = self.op.n_tokens;
        // The positions at offset 1 (a step's ids slot need not start its buffer).
        let pt = GpuTensor::from_u32(gpu, &[n + 1], &[&[0], &inp.pos[..]].concat());
        let ft = freqs_tensor(gpu, &inp.freqs);
        let hd = self.op.head_dim;
        let wq = GpuTensor::from_f32(gpu, &[hd], &inp.wq);
        let wk = GpuTensor::from_f32(gpu, &[hd], &inp.wk);
        let [qp, kp, vp] = self.places();
        let view = |p: Place| View::at(&t[p.buf], p.offset);
        let heads = |p: Place, n_heads, w| Heads {
            x: view(p),
            n_heads,
            stride: p.stride,
            weight: self.norm.then_some(w),
        };
        let q = heads(qp, self.q_heads, &wq);
        let k = (self.k_heads > 0).then(|| heads(kp, self.k_heads, &wk));
        let pos = View::at(&pt, 1);
        let cache = self.cache.map(|l| KvCache::new(gpu, l)).transpose()?;
        let ops = match (&cache, k) {
            (Some(cache), Some(k)) if fused => {
                let kv = KvStore {
                    v: view(vp),
                    v_stride: vp.stride,
                    cache,
                };
                vec![self.op.op_kv(q, k, kv, pos, &ft)?]
            }
            (Some(cache), _) => {
                let append = KvAppend {
                    n_tokens: n,
                    src_stride: kp.stride,
                };
                vec![
                    self.op.op(q, k, pos, &ft)?,
                    append.op(view(kp), view(vp), pos, cache)?,
                ]
            }
            (None, _) => vec![self.op.op(q, k, pos, &ft)?],
        };
        let mut b = StepBuilder::new();
        b.extend(ops);
        let mut step = b.build(gpu);
        let words = self.cache.map_or(0, |l| l.words());
        let largest = inp.bufs.iter().map(Vec::len).max().unwrap_or(0).max(words);
        let rb = Readback::new(gpu, (largest * 4) as u64);
        let mut bufs: Vec<Vec<u32>> = inp.bufs.iter().map(|b| vec![0; b.len()]).collect();
        rb.run_and_read(gpu, &mut step, &t[0], 0, &mut bufs[0])?;
        for (tensor, out) in t.iter().zip(&mut bufs).skip(1) {
            rb.read(gpu, tensor, 0, out)?;
        }
        let (mut k_words, mut v_words) = (vec![0; words], vec![0; words]);
        if let Some(cache) = &cache {
            rb.read(gpu, &cache.k, 0, &mut k_words)?;
            rb.read(gpu, &cache.v, 0, &mut v_words)?;
        }
        Ok(Out {
            bufs,
            k: k_words,
            v: v_words,
        })
    }

    /// The GPU's buffers against the reference over q and k; with a cache, the caches against
    /// kv_append's over the finished k and v (each value's bound moved with it).
    pub(crate) fn compare(&self, inp: &Inputs, got: &Out) -> Compare {
        let mut want = inp.bufs.clone();
        // 0: must be exact (v, padding, anything outside the heads).
        let mut bound: Vec<Vec<f64>> = want.iter().map(|b| vec![0.0; b.len()]).collect();
        let [qp, kp, vp] = self.places();
        for (p, n_heads, w) in [(qp, self.q_heads, &inp.wq), (kp, self.k_heads, &inp.wk)] {
            if n_heads == 0 {
                continue;
            }
            let h = HostHeads {
                x: &mut want[p.buf][p.offset..],
                n_heads,
                stride: p.stride,
                weight: self.norm.then_some(&w[..]),
            };
            let b = &mut bound[p.buf][p.offset..];
            self.op.reference_bounds(h, &inp.pos, &inp.freqs, b);
        }
        let mut c = Compare::default();
        for (b, ((got, want), bound)) in got.bufs.iter().zip(&want).zip(&bound).enumerate() {
            for (i, ((&g, &w), &e)) in got.iter().zip(want).zip(bound).enumerate() {
                let g = f64::from(f32::from_bits(g));
                c.add(g, f64::from(w), e, || {
                    format!("{self:?} buffer {b} elem {i}")
                });
            }
        }
        let Some(l) = self.cache else { return c };
        let append = KvAppend {
            n_tokens: self.op.n_tokens,
            src_stride: kp.stride,
        };
        let mut cache: HostKv = HostKv::zeros(l);
        let (k, v) = (&want[kp.buf][kp.offset..], &want[vp.buf][vp.offset..]);
        append.reference(k, v, &inp.pos, &mut cache);
        let mut cache_bound: HostKv<f64> = HostKv::zeros(l);
        let (k, v) = (&bound[kp.buf][kp.offset..], &bound[vp.buf][vp.offset..]);
        append.reference(k, v, &inp.pos, &mut cache_bound);
        for (which, words, want, bound) in [
            ("K", &got.k, &cache.k, &cache_bound.k),
            ("V", &got.v, &cache.v, &cache_bound.v),
        ] {
            let cached = l.decode(words);
            for (i, ((&g, &w), &e)) in cached.iter().zip(want).zip(bound).enumerate() {
                // An f16 cache rounds the value the bound is for (1 + 2^-10), then stores it.
                let e = e * (1.0 + 2f64.powi(-10)) + store_bound(l.dtype, w);
                c.add(f64::from(g), f64::from(w), e, || {
                    let (h, p, d) = (
                        i / l.head_dim / l.max_len,
                        i / l.head_dim % l.max_len,
                        i % l.head_dim,
                    );
                    format!("{self:?} {which} cache head {h} pos {p} dim {d}")
                });
            }
        }
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil;

    #[test]
    fn head_norm_rope_matches_reference() {
        testutil::parity("head_norm_rope", 10, 41);
    }

    /// Gemma 3 (4 q heads, 1 kv head, 256, NeoX, norms), Qwen3 (128, NeoX, norms), SmolLM2
    /// (9 q, 3 kv, 64, normal, no norm) and a partial rotary, fused and not, 1 and 5 tokens.
    #[test]
    fn model_shapes() {
        let Some(gpu) = testutil::gpu() else { return };
        let shapes = [
            (RopeStyle::Neox, 256, 256, 4, 1, true),
            (RopeStyle::Neox, 128, 128, 16, 8, true),
            (RopeStyle::Normal, 64, 64, 9, 3, false),
            (RopeStyle::Neox, 512, 128, 2, 1, true),
            (RopeStyle::Normal, 128, 32, 3, 1, true),
        ];
        for shape in shapes {
            for (n_tokens, fused) in [(1, false), (5, true)] {
                let case = Case::of_shape(shape, n_tokens, fused);
                let inp = case.inputs(0x5eed ^ shape.1 as u64);
                let c = case.compare(&inp, &case.run(gpu, &inp, true).unwrap());
                assert!(c.max_ratio <= 1.0, "{}", c.worst);
            }
        }
    }
}
