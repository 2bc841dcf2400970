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

use crate::error::GpuError;
use crate::kernel::KernelFamily;
use crate::op::{Op, grid_1d};
use crate::ops::head_norm_rope_kv::{self, KvStore};
use crate::ops::kv::{self, KvDtype};
use crate::ops::norm::REDUCE;
use crate::ops::rope::RopeStyle;
use crate::pipeline::PipelineKey;
use crate::shader::{BindingKind, Program, ShaderFile, shader_file};
use crate::tensor::{GpuTensor, View};

#[cfg(any(test, feature = "parity"))]
mod parity;
#[cfg(any(test, feature = "parity"))]
pub(crate) use parity::Case;
#[cfg(any(test, feature = "parity"))]
pub use parity::{CHECK, HostHeads};

#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub(crate) struct HeadNormRopeParams {
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

pub(crate) const WORKGROUP: u32 = 64;
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

    fn pipeline_keys(self) -> Vec<PipelineKey> {
        vec![PipelineKey::new(self, WORKGROUP)]
    }

    #[cfg(any(test, feature = "parity"))]
    fn checks() -> Vec<crate::parity::Check> {
        vec![CHECK, head_norm_rope_kv::CHECK]
    }
}

/// One tensor of heads, `[n_tokens, n_heads, head_dim]`: head h of token t starts at
/// `x.offset + t * stride + h * head_dim` (stride >= n_heads * head_dim; wider to pick q or k
/// out of fused qkv rows). `weight` (head_dim gains) turns the per-head norm on.
#[derive(Debug, Clone, Copy)]
pub struct Heads<'a> {
    /// Where the first token's first head starts.
    pub x: View<'a>,
    /// Heads per token.
    pub n_heads: usize,
    /// Elements from one token's heads to the next's.
    pub stride: usize,
    /// The per-head norm's gains; `None`: rotate only.
    pub weight: Option<&'a GpuTensor>,
}

/// Shape shared by q and k: `n_tokens` tokens, heads of `head_dim`, the first `n_rot` dims
/// rotated; `eps` of the norm.
#[derive(Debug, Clone, Copy)]
pub struct HeadNormRope {
    /// Which dims of a head pair up.
    pub style: RopeStyle,
    /// Elements per head.
    pub head_dim: usize,
    /// Dims rotated (even, at most `head_dim`).
    pub n_rot: usize,
    /// Tokens.
    pub n_tokens: usize,
    /// The norm's eps.
    pub eps: f32,
}

impl HeadNormRope {
    /// Norms (when the heads carry a weight) and rotates `q` and, if given, `k`, in place;
    /// token t is at position `pos[pos.offset + t]`; `freqs` from [`crate::ops::rope::rope_freqs`]. q and k
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
}
