//! Prompt-block attention on the tensor cores: `attention/attention_coop.wgsl`, which the
//! model runs for a prompt block over an f16 cache where the device has
//! [`crate::Caps::coop_f16`] and the tensor cores are allowed. Same contract as
//! [`Attention::ops`] for one split; q and the softmax weights rounded to f16, the products
//! on 16 x 16 x 16 cooperative matrices with f32 sums. A workgroup of 256 (8 subgroups of 32)
//! takes 64 query rows of one kv head, holds their q as A operands in registers (each
//! subgroup 16 rows over all of the dims) and walks the keys they see in blocks of 32 staged
//! as f16 in workgroup memory, each staged key feeding 64 rows and each block's cache reads
//! overlapping the products before it. Two passes over the keys (the rows' max and sum
//! first, then P V with the final ones: no per-row rescale of the output accumulators, which
//! a cooperative matrix cannot address by row). The parity check `CHECK` needs cooperative
//! matrices (it skips elsewhere and says so); the unit tests `body_*` run the same kernel
//! body everywhere, on lavapipe over the plain-arithmetic ops of `common/coop_emul.wgsl` and
//! `attention/coop_io_emul.wgsl` (staging, masks, both passes and the stores, not the tensor
//! cores themselves nor the layouts of their loads).
//!
//! The bound (per output row, `reference`): the plain kernel's
//! (`attention::CHECK`) with each score's dot product over q rounded to f16
//! (`e(q) = 2^-10 |q|`, or flushed below 2^-13: `ops::matmul_coop`'s rule) and summed on the
//! tensor cores (`(4 hd + 1) u` instead of `(hd + 5) u`: carried as a further `3 hd u |q|`
//! of q's error), four more rescalings of a row's sum (its 4 partial maxima and sums
//! combined; its blocks of 32 keys are within the plain kernel's count of 16-key tiles), plus
//! the softmax weights rounded to f16 (`sum_j e(p_j)`) and their sum with V on the tensor
//! cores (`(4n + 1) u`), times max |v|.

use crate::device::Caps;
use crate::error::GpuError;
use crate::kernel::KernelFamily;
use crate::op::Op;
use crate::ops::attention::{self, Attention, AttentionParams, HEAD_DIMS};
use crate::ops::attention_train_coop;
use crate::ops::kv::{KvCache, KvDtype, KvLayout};
use crate::pipeline::PipelineKey;
use crate::shader::{BindingKind, COOP_EMUL, COOP_OPS, Program, ShaderFile, shader_file};
use crate::tensor::View;

#[cfg(any(test, feature = "parity"))]
mod parity;
#[cfg(any(test, feature = "parity"))]
pub use parity::{CHECK, EXACT_CHECK, reference};

static BODY: ShaderFile = shader_file!("attention/attention_coop.wgsl");

const BINDINGS: &[BindingKind] = &[
    BindingKind::Uniform,
    BindingKind::StorageRead,
    BindingKind::StorageRead,
    BindingKind::StorageRead,
    BindingKind::StorageRead,
    BindingKind::StorageReadWrite,
];

/// Eight subgroups of 32 (`WG` in the program; `Caps::coop_f16` holds only where the
/// subgroup is 32 wide).
pub const WORKGROUP: u32 = 256;
/// Query rows per workgroup (`TR` in the program): four 16-row tiles.
const TILE_ROWS: usize = 64;
/// The cache lengths [`Attention::coop_fits`] accepts are multiples of this; the model
/// allocates its caches in whole blocks of it. (The kernel itself stages keys as zeros from
/// the tile's last on, so any length would do.)
pub const KEY_BLOCK: usize = 16;

/// The tensor-core attention kernel: `HD` = head_dim.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AttentionCoopKernel {
    /// `HD`: the head dimension.
    pub head_dim: u32,
}

impl KernelFamily for AttentionCoopKernel {
    /// Head dim 128 stands for every head dim (an override: one program for all).
    fn variants() -> Vec<AttentionCoopKernel> {
        vec![AttentionCoopKernel { head_dim: 128 }]
    }

    fn program(self) -> Program {
        program(false)
    }

    fn programs(self) -> Vec<Program> {
        vec![program(false), program(true)]
    }

    fn program_for(self, caps: &Caps) -> Program {
        program(!caps.coop_f16)
    }

    fn constants(self) -> Vec<(&'static str, f64)> {
        vec![("HD", f64::from(self.head_dim))]
    }

    fn pipeline_keys(self) -> Vec<PipelineKey> {
        vec![PipelineKey::new(self, WORKGROUP)]
    }

    #[cfg(any(test, feature = "parity"))]
    fn checks() -> Vec<crate::parity::Check> {
        vec![CHECK, EXACT_CHECK]
    }
}

/// The tensor-core program, or with `emulated` its body over emulated coop ops (needs only
/// SHADER_F16; what a device without cooperative matrices builds for the kernel).
fn program(emulated: bool) -> Program {
    let (name, ops, io) = if emulated {
        (
            "attention_coop_emulated",
            &COOP_EMUL,
            &attention_train_coop::IO_EMULATED,
        )
    } else {
        ("attention_coop", &COOP_OPS, &attention_train_coop::IO)
    };
    Program {
        name: name.to_string(),
        files: vec![
            ops,
            io,
            &attention::PARAMS,
            &attention_train_coop::FORWARD_TILE,
            &BODY,
        ],
        entry: "main",
        bindings: BINDINGS,
        params_size: size_of::<AttentionParams>(),
    }
}

impl Attention {
    /// Whether [`Attention::coop_ops`] takes this call over a cache of layout `l`: an f16
    /// cache whose length is a multiple of [`KEY_BLOCK`], a head dimension of [`HEAD_DIMS`],
    /// one split (a prompt block's attention) and query heads over whole kv-head groups.
    pub fn coop_fits(&self, l: &KvLayout) -> bool {
        l.dtype == KvDtype::F16
            && HEAD_DIMS.contains(&l.head_dim)
            && l.max_len >= KEY_BLOCK
            && l.max_len.is_multiple_of(KEY_BLOCK)
            && self.n_splits(l) == 1
            && self.n_heads > 0
            && self.n_heads.is_multiple_of(l.n_kv_heads)
    }

    /// The attention of [`Attention::ops`] as one tensor-core op (module doc), for the calls
    /// [`Attention::coop_fits`] accepts ([`GpuError::InvalidParams`] otherwise). On a device
    /// without cooperative matrices the op runs the emulated program (tests only).
    pub fn coop_ops(
        &self,
        q: View<'_>,
        pos: View<'_>,
        cache: &KvCache,
        out: View<'_>,
    ) -> Result<Vec<Op>, GpuError> {
        let l = cache.layout;
        if !self.coop_fits(&l) {
            return Err(GpuError::InvalidParams {
                op: "attention_coop",
                detail: format!(
                    "{self:?} over {l:?}: needs an f16 cache of a multiple of {KEY_BLOCK} \
                     positions, head_dim one of {HEAD_DIMS:?}, one split"
                ),
            });
        }
        let hd = l.head_dim;
        let span = self.n_tokens.saturating_sub(1) * self.q_stride + self.n_heads * hd;
        q.check("attention_coop q", span)?;
        pos.check("attention_coop pos", self.n_tokens)?;
        out.check("attention_coop out", self.n_tokens * self.n_heads * hd)?;
        let group = self.n_heads / l.n_kv_heads;
        let params = AttentionParams {
            n_tokens: self.n_tokens as u32,
            n_heads: self.n_heads as u32,
            group: group as u32,
            max_len: l.max_len as u32,
            q_offset: q.offset as u32,
            q_stride: self.q_stride as u32,
            out_offset: out.offset as u32,
            pos_offset: pos.offset as u32,
            window: self.window as u32,
            split_len: l.max_len as u32,
            n_splits: 1,
            records: 0,
            scale: self.scale,
            softcap: self.softcap,
            n_rot: 0,
            eps: 0.0,
            k_offset: 0,
            v_offset: 0,
            _pad: [0; 2],
        };
        let tiles = (self.n_tokens * group).div_ceil(TILE_ROWS);
        let kernel = AttentionCoopKernel {
            head_dim: hd as u32,
        };
        let buffers = [&q.t.buf, &cache.k.buf, &cache.v.buf, &pos.t.buf, &out.t.buf];
        let grid = [tiles as u32, l.n_kv_heads as u32, 1];
        Ok(vec![Op::new(kernel, WORKGROUP, &params, &buffers, grid)])
    }
}
