//! The KV cache and the op that appends a step's K and V rows to it.
//!
//! Layout: per layer one K and one V buffer of `[n_kv_heads, max_len, head_dim]` (a head's
//! history contiguous, so attention streams it), in f32 or in f16 (two values packed per u32
//! word with `pack2x16float`: no SHADER_F16 needed). Positions come from a u32 GPU buffer,
//! so a replayed decode step needs no new parameters.
//!
//! WGSL: `attention/kv_append.wgsl` + `attention/kv_store_<dtype>.wgsl`. One invocation per
//! pair of values, 64 per workgroup.

use half::f16;

use crate::device::Gpu;
use crate::error::GpuError;
use crate::kernel::KernelFamily;
use crate::op::{Op, grid_1d};
use crate::pipeline::PipelineKey;
use crate::shader::{BindingKind, Program, ShaderFile, shader_file};
use crate::tensor::{Dtype, GpuTensor, View};

#[cfg(any(test, feature = "parity"))]
mod parity;
#[cfg(any(test, feature = "parity"))]
pub use parity::{CHECK, HostKv, store_bound};

/// Element type of a KV cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KvDtype {
    /// f32: the CPU reference's exact values.
    F32,
    /// IEEE half, two per u32 word (low half first).
    F16,
}

impl KvDtype {
    pub(crate) fn name(self) -> &'static str {
        match self {
            KvDtype::F32 => "f32",
            KvDtype::F16 => "f16",
        }
    }
}

/// Shape of one layer's cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KvLayout {
    /// Element type.
    pub dtype: KvDtype,
    /// Key/value heads.
    pub n_kv_heads: usize,
    /// Even; attention needs a multiple of 16 (at most 256).
    pub head_dim: usize,
    /// Positions the cache holds.
    pub max_len: usize,
}

impl KvLayout {
    /// 4-byte words of one of K or V.
    pub fn words(&self) -> usize {
        let n = self.n_kv_heads * self.max_len * self.head_dim;
        match self.dtype {
            KvDtype::F32 => n,
            KvDtype::F16 => n / 2,
        }
    }

    /// Element index of (kv head, position, dim) in the flattened cache.
    pub fn index(&self, head: usize, pos: usize, dim: usize) -> usize {
        (head * self.max_len + pos) * self.head_dim + dim
    }

    /// Decodes words read back from a cache into f32 values (f16: low half first).
    pub fn decode(&self, words: &[u32]) -> Vec<f32> {
        match self.dtype {
            KvDtype::F32 => words.iter().map(|&w| f32::from_bits(w)).collect(),
            KvDtype::F16 => words
                .iter()
                .flat_map(|&w| {
                    [
                        f16::from_bits(w as u16).to_f32(),
                        f16::from_bits((w >> 16) as u16).to_f32(),
                    ]
                })
                .collect(),
        }
    }
}

/// One layer's K and V caches.
#[derive(Debug, Clone)]
pub struct KvCache {
    /// The keys.
    pub k: GpuTensor,
    /// The values.
    pub v: GpuTensor,
    /// Their shape and element type.
    pub layout: KvLayout,
}

impl KvCache {
    /// Zero-filled caches (load time).
    pub fn new(gpu: &Gpu, layout: KvLayout) -> Result<KvCache, GpuError> {
        if layout.head_dim == 0 || !layout.head_dim.is_multiple_of(2) {
            return Err(GpuError::Shape {
                op: "kv cache",
                detail: format!("head_dim {} must be even", layout.head_dim),
            });
        }
        let words = layout.words();
        let bytes = (words * 4) as u64;
        if bytes > gpu.max_binding_bytes() {
            return Err(GpuError::TooLarge {
                what: "one layer's K cache",
                bytes,
                limit: gpu.max_binding_bytes(),
            });
        }
        let dtype = match layout.dtype {
            KvDtype::F32 => Dtype::F32,
            KvDtype::F16 => Dtype::U32,
        };
        let (k, v) = gpu.allocate("one layer's KV cache", 2 * bytes, || {
            (
                GpuTensor::zeros(gpu, &[words], dtype),
                GpuTensor::zeros(gpu, &[words], dtype),
            )
        })?;
        Ok(KvCache { k, v, layout })
    }
}

#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub(crate) struct KvAppendParams {
    pub n_tokens: u32,
    pub n_kv_heads: u32,
    pub head_dim: u32,
    pub max_len: u32,
    pub k_offset: u32,
    pub v_offset: u32,
    pub src_stride: u32,
    pub pos_offset: u32,
}

static APPEND: ShaderFile = shader_file!("attention/kv_append.wgsl");
static STORE_F32: ShaderFile = shader_file!("attention/kv_store_f32.wgsl");
static STORE_F16: ShaderFile = shader_file!("attention/kv_store_f16.wgsl");
static LOAD_F32: ShaderFile = shader_file!("attention/kv_load_f32.wgsl");
static LOAD_F16: ShaderFile = shader_file!("attention/kv_load_f16.wgsl");

const BINDINGS: &[BindingKind] = &[
    BindingKind::Uniform,
    BindingKind::StorageRead,
    BindingKind::StorageRead,
    BindingKind::StorageRead,
    BindingKind::StorageReadWrite,
    BindingKind::StorageReadWrite,
];

pub(crate) const WORKGROUP: u32 = 64;

/// The file that stores pairs of values into a cache of `dtype` (`store_k`, `store_v` over the
/// `kc`, `vc` the including kernel binds as `array<KvWord>`, and `kv_word`, the word a pair is
/// stored as): kv_append, head_norm_rope's cache variant and the rotating decode attention
/// share it.
pub(crate) fn store_file(dtype: KvDtype) -> &'static ShaderFile {
    match dtype {
        KvDtype::F32 => &STORE_F32,
        KvDtype::F16 => &STORE_F16,
    }
}

/// The file that names a cache's word type `KvWord` and reads a word's pair of values
/// (`kv_pair`): every kernel over a cache includes it (the stores use its `KvWord`).
pub(crate) fn load_file(dtype: KvDtype) -> &'static ShaderFile {
    match dtype {
        KvDtype::F32 => &LOAD_F32,
        KvDtype::F16 => &LOAD_F16,
    }
}

/// The kv_append kernel for a cache of one type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct KvAppendKernel(pub KvDtype);

impl KernelFamily for KvAppendKernel {
    fn variants() -> Vec<KvAppendKernel> {
        vec![KvAppendKernel(KvDtype::F32), KvAppendKernel(KvDtype::F16)]
    }

    fn program(self) -> Program {
        let dtype = self.0;
        Program {
            name: format!("kv_append_{}", dtype.name()),
            files: vec![&APPEND, load_file(dtype), store_file(dtype)],
            entry: "main",
            bindings: BINDINGS,
            params_size: size_of::<KvAppendParams>(),
        }
    }

    fn pipeline_keys(self) -> Vec<PipelineKey> {
        vec![PipelineKey::new(self, WORKGROUP)]
    }

    #[cfg(any(test, feature = "parity"))]
    fn checks() -> Vec<crate::parity::Check> {
        vec![CHECK]
    }
}

/// Appending `n_tokens` tokens' K and V rows.
#[derive(Debug, Clone, Copy)]
pub struct KvAppend {
    /// Tokens appended, at consecutive positions.
    pub n_tokens: usize,
    /// Elements from one token's K (or V) row to the next's (the fused qkv row width, or
    /// `n_kv_heads * head_dim` for separate tensors).
    pub src_stride: usize,
}

impl KvAppend {
    /// Token t's K row `k[k.offset + t * src_stride..][..n_kv_heads * head_dim]` (and V's)
    /// go to position `pos[pos.offset + t]` of `cache`. K and V may be views of one tensor.
    pub fn op(
        self,
        k: View<'_>,
        v: View<'_>,
        pos: View<'_>,
        cache: &KvCache,
    ) -> Result<Op, GpuError> {
        let l = cache.layout;
        let row = l.n_kv_heads * l.head_dim;
        let span = self.n_tokens.saturating_sub(1) * self.src_stride + row;
        k.check("kv_append k", span)?;
        v.check("kv_append v", span)?;
        pos.check("kv_append pos", self.n_tokens)?;
        let params = KvAppendParams {
            n_tokens: self.n_tokens as u32,
            n_kv_heads: l.n_kv_heads as u32,
            head_dim: l.head_dim as u32,
            max_len: l.max_len as u32,
            k_offset: k.offset as u32,
            v_offset: v.offset as u32,
            src_stride: self.src_stride as u32,
            pos_offset: pos.offset as u32,
        };
        let pairs = self.n_tokens * row / 2;
        let buffers = [&k.t.buf, &v.t.buf, &pos.t.buf, &cache.k.buf, &cache.v.buf];
        Ok(Op::new(
            KvAppendKernel(l.dtype),
            WORKGROUP,
            &params,
            &buffers,
            grid_1d(pairs.div_ceil(WORKGROUP as usize)),
        ))
    }
}
