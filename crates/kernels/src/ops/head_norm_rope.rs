//! Per-head RMS norm (Gemma 3 / Qwen3 `q_norm`, `k_norm`) then RoPE, in place, for q and k in
//! one dispatch.
//!
//! WGSL: `rope/head_norm_rope.wgsl` (`NEOX` and `NORM` overrides, both in the pipeline key) +
//! `norm/reduce.wgsl`. One workgroup of 64 per (tensor, token, head); each invocation holds up
//! to 4 pairs (head_dim <= 512) in registers from the load to the store. The rotation is
//! rope.wgsl's (same pairing, same frequency table from [`rope_freqs`]), so with the norm off
//! this is [`crate::ops::rope::Rope`] over q and k at once.
//!
//! The same program also stores the finished k heads and the v heads into a layer's KV cache
//! when given one (`kv_append` folded in): [`crate::ops::head_norm_rope_kv`].
//!
//! [`rope_freqs`]: crate::ops::rope::rope_freqs

use crate::device::Gpu;
use crate::error::GpuError;
use crate::kernel::KernelFamily;
use crate::op::{Op, grid_1d};
use crate::ops::head_norm_rope_kv::{self, KvStore};
use crate::ops::kv::{self, KvDtype};
use crate::ops::norm::REDUCE;
use crate::ops::rope::{RopeStyle, rope_freqs};
use crate::parity::data::{Rng, random_f32};
use crate::parity::{Check, Compare, U};
use crate::readback::Readback;
use crate::shader::{BindingKind, Program, ShaderFile, shader_file};
use crate::step::StepBuilder;
use crate::tensor::{GpuTensor, View};

#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct HeadNormRopeParams {
    pub head_dim: u32,
    pub n_rot: u32,
    pub n_tokens: u32,
    pub pos_offset: u32,
    pub q_heads: u32,
    pub q_offset: u32,
    pub q_stride: u32,
    pub k_heads: u32,
    pub k_offset: u32,
    pub k_stride: u32,
    pub eps: f32,
    /// The cache variant's (0 without a cache): positions the cache holds, and where the v
    /// heads are (as q's and k's offset and stride).
    pub max_len: u32,
    pub v_offset: u32,
    pub v_stride: u32,
    pub _pad: [u32; 2],
}

static SHADER: ShaderFile = shader_file!("rope/head_norm_rope.wgsl");
/// The k-head hooks of the plain kernel (none: no cache).
static KV_NONE: ShaderFile = shader_file!("rope/kv_none.wgsl");
/// The per-element norm and rotation, shared with the rotating decode attention.
pub(crate) static ROTATE: ShaderFile = shader_file!("rope/rotate.wgsl");

/// params, xq, xk (read-write; the same buffer twice for fused qkv rows), pos, freqs, wq, wk.
const BINDINGS: &[BindingKind] = &[
    BindingKind::Uniform,
    BindingKind::StorageReadWrite,
    BindingKind::StorageReadWrite,
    BindingKind::StorageRead,
    BindingKind::StorageRead,
    BindingKind::StorageRead,
    BindingKind::StorageRead,
];

pub const WORKGROUP: u32 = 64;
/// Pairs per invocation (`PAIRS` in the WGSL).
const PAIRS: usize = 4;
/// The largest head_dim one workgroup holds.
pub const MAX_HEAD_DIM: usize = 2 * PAIRS * WORKGROUP as usize;

/// The head_norm_rope kernel: its rotation (`NEOX`), the per-head norm (`NORM`), and with
/// `kv` the variant that also stores into a cache of that type
/// ([`crate::ops::head_norm_rope_kv`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct HeadNormRopeKernel {
    /// `NEOX`: which dimensions form a rotated pair.
    pub style: RopeStyle,
    /// `NORM`: each head normed (weighted) before the rotation.
    pub norm: bool,
    /// The type of the cache the finished k and v heads go into, if any.
    pub kv: Option<KvDtype>,
}

impl KernelFamily for HeadNormRopeKernel {
    fn variants() -> Vec<HeadNormRopeKernel> {
        let mut all = Vec::new();
        for style in [RopeStyle::Normal, RopeStyle::Neox] {
            for norm in [false, true] {
                for kv in [None, Some(KvDtype::F32), Some(KvDtype::F16)] {
                    all.push(HeadNormRopeKernel { style, norm, kv });
                }
            }
        }
        all
    }

    fn program(self) -> Program {
        let HeadNormRopeKernel { norm, kv, .. } = self;
        let name = if norm { "head_norm_rope" } else { "head_rope" };
        let Some(dtype) = kv else {
            return Program {
                name: name.to_string(),
                files: vec![&SHADER, &ROTATE, &REDUCE, &KV_NONE],
                entry: "main",
                bindings: BINDINGS,
                params_size: size_of::<HeadNormRopeParams>(),
            };
        };
        Program {
            name: format!("{name}_kv_{}", dtype.name()),
            files: vec![
                &SHADER,
                &ROTATE,
                &REDUCE,
                &head_norm_rope_kv::HOOKS,
                kv::load_file(dtype),
                kv::store_file(dtype),
            ],
            entry: "main",
            bindings: head_norm_rope_kv::BINDINGS,
            params_size: size_of::<HeadNormRopeParams>(),
        }
    }

    fn constants(self) -> Vec<(&'static str, f64)> {
        vec![
            ("NEOX", self.style.code()),
            ("NORM", f64::from(u8::from(self.norm))),
        ]
    }

    #[cfg(any(test, feature = "parity"))]
    fn checks() -> Vec<Check> {
        vec![CHECK, head_norm_rope_kv::CHECK]
    }
}

/// One tensor of heads, `[n_tokens, n_heads, head_dim]`: head h of token t starts at
/// `x.offset + t * stride + h * head_dim` (stride >= n_heads * head_dim; wider to pick q or k
/// out of fused qkv rows). `weight` (head_dim gains) turns the per-head norm on.
#[derive(Debug, Clone, Copy)]
pub struct Heads<'a> {
    pub x: View<'a>,
    pub n_heads: usize,
    pub stride: usize,
    pub weight: Option<&'a GpuTensor>,
}

/// The same, on the host (the reference's input): `x` starts at the view's offset.
#[derive(Debug)]
pub struct HostHeads<'a> {
    pub x: &'a mut [f32],
    pub n_heads: usize,
    pub stride: usize,
    pub weight: Option<&'a [f32]>,
}

/// Shape shared by q and k: `n_tokens` tokens, heads of `head_dim`, the first `n_rot` dims
/// rotated; `eps` of the norm.
#[derive(Debug, Clone, Copy)]
pub struct HeadNormRope {
    pub style: RopeStyle,
    pub head_dim: usize,
    pub n_rot: usize,
    pub n_tokens: usize,
    pub eps: f32,
}

impl HeadNormRope {
    /// Norms (when the heads carry a weight) and rotates `q` and, if given, `k`, in place;
    /// token t is at position `pos[pos.offset + t]`; `freqs` from [`rope_freqs`]. q and k
    /// either both carry a weight or neither does; they may share a buffer (fused qkv rows)
    /// but must not overlap.
    pub fn op(
        self,
        q: Heads<'_>,
        k: Option<Heads<'_>>,
        pos: View<'_>,
        freqs: &GpuTensor,
    ) -> Result<Op, GpuError> {
        self.build(q, k, None, pos, freqs)
    }

    /// [`HeadNormRope::op`], and with `kv` the finished k heads and `kv`'s v heads stored in
    /// its cache (checked by [`KvStore::check`]).
    pub(crate) fn build(
        self,
        q: Heads<'_>,
        k: Option<Heads<'_>>,
        kv: Option<KvStore<'_>>,
        pos: View<'_>,
        freqs: &GpuTensor,
    ) -> Result<Op, GpuError> {
        let hd = self.head_dim;
        if hd == 0 || !hd.is_multiple_of(2) || hd > MAX_HEAD_DIM {
            return Err(self.shape_error(format!("head_dim {hd}: even, 2..={MAX_HEAD_DIM}")));
        }
        if !self.n_rot.is_multiple_of(2) || self.n_rot > hd {
            return Err(self.shape_error(format!("n_rot {} with head_dim {hd}", self.n_rot)));
        }
        if k.is_some_and(|k| k.weight.is_some() != q.weight.is_some()) {
            return Err(self.shape_error("q and k must both have a norm weight or neither".into()));
        }
        for h in [Some(q), k].into_iter().flatten() {
            self.check(h)?;
        }
        pos.check("head_norm_rope pos", self.n_tokens)?;
        View::from(freqs).check("head_norm_rope freqs", self.n_rot / 2)?;
        if let Some(kv) = kv {
            kv.check(self, k)?;
        }
        let k_or_q = k.unwrap_or(Heads { n_heads: 0, ..q });
        let params = HeadNormRopeParams {
            head_dim: hd as u32,
            n_rot: self.n_rot as u32,
            n_tokens: self.n_tokens as u32,
            pos_offset: pos.offset as u32,
            q_heads: q.n_heads as u32,
            q_offset: q.x.offset as u32,
            q_stride: q.stride as u32,
            k_heads: k_or_q.n_heads as u32,
            k_offset: k_or_q.x.offset as u32,
            k_stride: k_or_q.stride as u32,
            eps: self.eps,
            max_len: kv.map_or(0, |kv| kv.cache.layout.max_len as u32),
            v_offset: kv.map_or(0, |kv| kv.v.offset as u32),
            v_stride: kv.map_or(0, |kv| kv.v_stride as u32),
            _pad: [0; 2],
        };
        // Without a norm the weight slots bind `freqs` (never read by that variant).
        let wq = q.weight.map_or(&freqs.buf, |w| &w.buf);
        let wk = k_or_q.weight.map_or(wq, |w| &w.buf);
        let mut buffers = vec![&q.x.t.buf, &k_or_q.x.t.buf, &pos.t.buf, &freqs.buf, wq, wk];
        if let Some(kv) = kv {
            buffers.extend([&kv.v.t.buf, &kv.cache.k.buf, &kv.cache.v.buf]);
        }
        let kernel = HeadNormRopeKernel {
            style: self.style,
            norm: q.weight.is_some(),
            kv: kv.map(|kv| kv.cache.layout.dtype),
        };
        let groups = self.n_tokens * (q.n_heads + k.map_or(0, |k| k.n_heads));
        Ok(Op::new(
            kernel,
            WORKGROUP,
            &params,
            &buffers,
            grid_1d(groups),
        ))
    }

    pub(crate) fn shape_error(self, detail: String) -> GpuError {
        GpuError::Shape {
            op: "head_norm_rope",
            detail,
        }
    }

    fn check(self, h: Heads<'_>) -> Result<(), GpuError> {
        if h.stride < h.n_heads * self.head_dim {
            return Err(self.shape_error(format!(
                "stride {} < {} heads of {}",
                h.stride, h.n_heads, self.head_dim
            )));
        }
        if self.n_tokens > 0 && h.n_heads > 0 {
            let len = (self.n_tokens - 1) * h.stride + h.n_heads * self.head_dim;
            h.x.check("head_norm_rope x", len)?;
        }
        if let Some(w) = h.weight {
            View::from(w).check("head_norm_rope weight", self.head_dim)?;
        }
        Ok(())
    }

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

/// A random case's layout: q and k in separate buffers, or both in one buffer of fused
/// `[q | k | v]` rows (the same buffer bound twice).
#[derive(Debug, Clone, Copy)]
struct Case {
    op: HeadNormRope,
    q_heads: usize,
    /// 0: q alone.
    k_heads: usize,
    norm: bool,
    fused: bool,
    /// Extra elements at the end of each row.
    pad: usize,
}

fn parity_case(gpu: &Gpu, rng: &mut Rng) -> Result<Compare, GpuError> {
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
    let case = Case {
        op: HeadNormRope {
            style,
            head_dim,
            n_rot,
            n_tokens: rng.range(1, 5),
            eps: 1e-6,
        },
        q_heads: rng.range(1, 6),
        k_heads: rng.range(0, 3),
        norm: rng.bool(),
        fused: rng.bool(),
        pad: rng.range(0, 3),
    };
    compare(gpu, case, rng.next_u64())
}

fn compare(gpu: &Gpu, case: Case, seed: u64) -> Result<Compare, GpuError> {
    let op = case.op;
    let (hd, nt) = (op.head_dim, op.n_tokens);
    let (qw, kw) = (case.q_heads * hd, case.k_heads * hd);
    // Row layouts: fused [q | k | v | pad] rows in one buffer; else q and k rows of their own.
    let (q_stride, k_stride) = if case.fused {
        (qw + 2 * kw + case.pad, qw + 2 * kw + case.pad)
    } else {
        (qw + case.pad, kw + case.pad)
    };
    let (q_off, k_off) = if case.fused { (1, 1 + qw) } else { (1, 2) };
    let q_host = random_f32(1 + nt * q_stride, seed);
    let k_host = random_f32(2 + nt * k_stride, seed ^ 1);
    let wq = random_f32(hd, seed ^ 2);
    let wk = random_f32(hd, seed ^ 3);
    let pos: Vec<u32> = (0..nt).map(|t| ((seed >> (8 * t)) % 5000) as u32).collect();
    let base = if seed & 1 == 0 { 10_000.0 } else { 1e6 };
    let freqs = rope_freqs(op.n_rot, base, 1.0, None);

    let qt = GpuTensor::from_f32(gpu, &[q_host.len()], &q_host);
    let kt = GpuTensor::from_f32(gpu, &[k_host.len()], &k_host);
    let pt = GpuTensor::from_u32(gpu, &[nt], &pos);
    // n_rot = 0 has no frequencies; a buffer still needs an element.
    let f_data = if freqs.is_empty() {
        vec![0.0]
    } else {
        freqs.clone()
    };
    let ft = GpuTensor::from_f32(gpu, &[f_data.len()], &f_data);
    let wqt = GpuTensor::from_f32(gpu, &[hd], &wq);
    let wkt = GpuTensor::from_f32(gpu, &[hd], &wk);
    let k_tensor = if case.fused { &qt } else { &kt };
    let q = Heads {
        x: View::at(&qt, q_off),
        n_heads: case.q_heads,
        stride: q_stride,
        weight: case.norm.then_some(&wqt),
    };
    let k = (case.k_heads > 0).then_some(Heads {
        x: View::at(k_tensor, k_off),
        n_heads: case.k_heads,
        stride: k_stride,
        weight: case.norm.then_some(&wkt),
    });
    let mut b = StepBuilder::new();
    b.push(op.op(q, k, View::from(&pt), &ft)?);
    let mut step = b.build(gpu);
    let rb = Readback::new(gpu, (q_host.len().max(k_host.len()) * 4) as u64);
    let mut q_gpu = vec![0f32; q_host.len()];
    rb.run_and_read(gpu, &mut step, &qt, 0, &mut q_gpu)?;
    let mut k_gpu = vec![0f32; k_host.len()];
    rb.read(gpu, &kt, 0, &mut k_gpu)?;

    // Expected buffers and per-element bounds (0: must be exact).
    let mut q_want = q_host.clone();
    let mut q_bound = vec![0f64; q_host.len()];
    let mut k_want = k_host.clone();
    let mut k_bound = vec![0f64; k_host.len()];
    let heads = [
        (q_off, case.q_heads, q_stride, &wq, false),
        (k_off, case.k_heads, k_stride, &wk, !case.fused),
    ];
    for (off, n_heads, stride, w, in_k) in heads {
        let (want, bound) = if in_k {
            (&mut k_want, &mut k_bound)
        } else {
            (&mut q_want, &mut q_bound)
        };
        let h = HostHeads {
            x: &mut want[off..],
            n_heads,
            stride,
            weight: case.norm.then_some(w),
        };
        op.reference_bounds(h, &pos, &freqs, &mut bound[off..]);
    }
    let mut c = Compare::default();
    for (name, got, want, bound) in [
        ("q", &q_gpu, &q_want, &q_bound),
        ("k", &k_gpu, &k_want, &k_bound),
    ] {
        for (i, ((&g, &r), &b)) in got.iter().zip(want).zip(bound).enumerate() {
            c.add(f64::from(g), f64::from(r), b, || {
                format!("{case:?} buffer {name} elem {i}")
            });
        }
    }
    Ok(c)
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
        for (style, head_dim, n_rot, q_heads, k_heads, norm) in shapes {
            for (n_tokens, fused) in [(1, false), (5, true)] {
                let case = Case {
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
                };
                let c = compare(gpu, case, 0x5eed ^ head_dim as u64).unwrap();
                assert!(c.max_ratio <= 1.0, "{}", c.worst);
            }
        }
    }
}
