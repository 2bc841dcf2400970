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

use crate::error::GpuError;
use crate::op::Op;
use crate::ops::head_norm_rope::{HeadNormRope, Heads};
use crate::ops::kv::KvCache;
use crate::shader::{BindingKind, ShaderFile, shader_file};
use crate::tensor::{GpuTensor, View};

#[cfg(any(test, feature = "parity"))]
mod parity;
#[cfg(any(test, feature = "parity"))]
pub use parity::CHECK;

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
    /// The first token's v heads.
    pub v: View<'a>,
    /// Elements from one token's v heads to the next's.
    pub v_stride: usize,
    /// The layer's cache.
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
    /// stored at position `pos[pos.offset + t]` of `kv.cache` (what [`crate::ops::kv::KvAppend`] stores from
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
