//! Prompt-block attention on the tensor cores: `attention/attention_coop.wgsl`, which the
//! model runs for a prompt block over an f16 cache where the device has
//! [`crate::Caps::coop_f16`] and the tensor cores are allowed. Same contract as
//! [`Attention::ops`] for one split; q and the softmax weights rounded to f16, the products
//! on 16 x 16 x 16 cooperative matrices with f32 sums. A workgroup of 256 (8 subgroups of 32)
//! takes 64 query rows of one kv head, holds their q as A operands in registers (each
//! subgroup 16 rows over all of the dims) and walks the keys they see in blocks of 32 staged
//! as f16 in workgroup memory, each staged key feeding 64 rows and each block's cache reads
//! overlapping the products before it. One pass over the keys with each row's weights
//! `exp(s - m)` against the max of its first block with a key (no per-row rescale of the
//! output accumulators, which a cooperative matrix cannot address by row; each row divided
//! by its sum where it is stored), started over against each row's max over all of its keys
//! for a tile where a later score passes that reference by more than an f16 weight holds.
//! A block of few row tiles splits each tile's keys over more workgroups
//! ([`Attention::coop_key_splits`]), each split's partial results going to a scratch that
//! the training forward's combine kernel rescales into the output. The parity check `CHECK`
//! needs cooperative matrices (it skips elsewhere and says so); the unit tests `body_*` run
//! the same kernel body everywhere, on lavapipe over the plain-arithmetic ops of
//! `common/coop_emul.wgsl` and `attention/coop_io_emul.wgsl` (staging, masks, both attempts
//! and the stores, not the tensor cores themselves nor the layouts of their loads).
//!
//! The bound (per output row, `reference`): the plain kernel's
//! (`attention::CHECK`) with each score's dot product over q rounded to f16
//! (`e(q) = 2^-10 |q|`, or flushed below 2^-13: `ops::matmul_coop`'s rule) and summed on the
//! tensor cores (`(4 hd + 1) u` instead of `(hd + 5) u`: carried as a further `3 hd u |q|`
//! of q's error), four more rescalings of a row's sum (its 4 partial maxima and sums
//! combined; its blocks of 32 keys are within the plain kernel's count of 16-key tiles), plus
//! the softmax weights rounded to f16 (`sum_j e(p_j)`) and their sum with V on the tensor
//! cores (`(4n + 1) u`), times max |v|. The one pass's weights `exp(s - m)`, m at most the
//! row's max, are the normalised ones times the row's sum (at least 1): their f16 rounding
//! errs by the same relative ulp and flushes to zero no sooner; a row's 4 partial sums share
//! its reference, and its one division by the sum takes the place of their rescalings.

use crate::error::GpuError;
use crate::kernel::KernelFamily;
use crate::op::Op;
use crate::ops::attention::{self, Attention, AttentionParams, HEAD_DIMS};
use crate::ops::attention_train::{self, Combine};
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
/// Fewer unsplit workgroups than this split their keys: fewer than an H100's or H200's 132
/// multiprocessors, each of which holds about one of these workgroups (registers for 16 held
/// q operands and up to 8 accumulators an invocation). Kernels bench, H200
/// (`attention_coop/...` beside `.../s1`, docs/PERF.md D-prompt-key-splits): 58 workgroups
/// (gemma-3-270m, 922 tokens) 279 -> 144 us with 5 splits and 32 (512 tokens) 164 -> 88 us
/// with 8; 116 (gemma3-4b) 283 -> 289 us with 3 and 224 (qwen2.5-0.5b, 1,024 tokens) 107 ->
/// 120 us with 2: a split's partial results and the combine then cost more than the idle
/// multiprocessors did.
const SPLIT_BELOW_WORKGROUPS: usize = 100;
/// The workgroups a split block aims for: about two waves of one a multiprocessor, so that
/// the causal tiles' unequal shares even out.
const FILL_WORKGROUPS: usize = 256;
/// The most splits of a tile's keys: each split adds a slice of partial outputs to the
/// scratch and to the combine's reads.
const MAX_KEY_SPLITS: usize = 8;

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

    fn emulated_program(self) -> Option<Program> {
        Some(program(true))
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
            &attention_train::SPLIT_SHARE,
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

    /// The row tiles' workgroups of [`Attention::coop_ops`] without splits: one per 64 query
    /// rows of a kv head.
    fn coop_workgroups(&self, l: &KvLayout) -> usize {
        let group = self.n_heads / l.n_kv_heads.max(1);
        (self.n_tokens * group).div_ceil(TILE_ROWS) * l.n_kv_heads
    }

    /// How many ways [`Attention::coop_ops`] should split each row tile's keys: 1 where the
    /// tiles number at least 100 (`SPLIT_BELOW_WORKGROUPS`), else enough to reach about 256
    /// workgroups (`FILL_WORKGROUPS`; at most 8 splits). gemma-3-270m's prompt of 922 tokens
    /// has 58 row tiles of its one kv head: 5 splits.
    pub fn coop_key_splits(&self, l: &KvLayout) -> usize {
        let workgroups = self.coop_workgroups(l).max(1);
        match workgroups < SPLIT_BELOW_WORKGROUPS {
            true => FILL_WORKGROUPS
                .div_ceil(workgroups)
                .clamp(1, MAX_KEY_SPLITS),
            false => 1,
        }
    }

    /// f32 elements of the scratch [`Attention::coop_ops`] needs for `splits` splits: each
    /// split's outputs, maxima and sums (0 for one split).
    pub fn coop_scratch_len(&self, l: &KvLayout, splits: usize) -> usize {
        self.coop_combine(l, splits).len()
    }

    /// The layout of [`Attention::coop_ops`]'s partial results split `splits` ways: rows
    /// (token, head) in out's order.
    fn coop_combine(&self, l: &KvLayout, splits: usize) -> Combine {
        Combine {
            rows: self.n_tokens * self.n_heads,
            dv: l.head_dim,
            splits,
        }
    }

    /// The attention of [`Attention::ops`] on the tensor cores (module doc), for the calls
    /// [`Attention::coop_fits`] accepts ([`GpuError::InvalidParams`] otherwise), each row
    /// tile's keys split `splits` ways: with more than one, the splits' partial results go to
    /// `scratch` ([`Attention::coop_scratch_len`] elements, another tensor than `out`) and a
    /// combine op writes `out`. One split is one op. On a device without cooperative
    /// matrices the ops run the emulated program (tests only).
    pub fn coop_ops(
        &self,
        q: View<'_>,
        pos: View<'_>,
        cache: &KvCache,
        out: View<'_>,
        scratch: Option<View<'_>>,
        splits: usize,
    ) -> Result<Vec<Op>, GpuError> {
        const OP: &str = "attention_coop";
        let l = cache.layout;
        if !self.coop_fits(&l) {
            return Err(GpuError::InvalidParams {
                op: OP,
                detail: format!(
                    "{self:?} over {l:?}: needs an f16 cache of a multiple of {KEY_BLOCK} \
                     positions, head_dim one of {HEAD_DIMS:?}, one split"
                ),
            });
        }
        let hd = l.head_dim;
        let span = self.n_tokens.saturating_sub(1) * self.q_stride + self.n_heads * hd;
        let n_out = self.n_tokens * self.n_heads * hd;
        q.check("attention_coop q", span)?;
        pos.check("attention_coop pos", self.n_tokens)?;
        out.check("attention_coop out", n_out)?;
        let splits = splits.clamp(1, MAX_KEY_SPLITS);
        // Split, the tiles write their partial results into the scratch: the outputs, then the
        // maxima and sums.
        let combine = self.coop_combine(&l, splits);
        let (tiles_out, records) = match (splits, scratch) {
            (1, _) => (out, 0),
            (_, Some(t)) => {
                combine.check_scratch((OP, "attention_coop scratch"), t, &[out])?;
                (t, combine.ml_offset(t))
            }
            (_, None) => {
                return Err(GpuError::InvalidParams {
                    op: OP,
                    detail: format!("{splits} key splits without a scratch"),
                });
            }
        };
        let group = self.n_heads / l.n_kv_heads;
        let params = AttentionParams {
            n_tokens: self.n_tokens as u32,
            n_heads: self.n_heads as u32,
            group: group as u32,
            max_len: l.max_len as u32,
            q_offset: q.offset as u32,
            q_stride: self.q_stride as u32,
            out_offset: tiles_out.offset as u32,
            pos_offset: pos.offset as u32,
            window: self.window as u32,
            split_len: l.max_len as u32,
            n_splits: splits as u32,
            records: records as u32,
            scale: self.scale,
            softcap: self.softcap,
            n_rot: 0,
            eps: 0.0,
            k_offset: 0,
            v_offset: 0,
            _pad: [0; 2],
        };
        let kernel = AttentionCoopKernel {
            head_dim: hd as u32,
        };
        let buffers = [
            &q.t.buf,
            &cache.k.buf,
            &cache.v.buf,
            &pos.t.buf,
            &tiles_out.t.buf,
        ];
        let tiles = self.coop_workgroups(&l) / l.n_kv_heads;
        let grid = [tiles as u32, l.n_kv_heads as u32, splits as u32];
        let mut ops = vec![Op::new(kernel, WORKGROUP, &params, &buffers, grid)];
        if splits > 1 {
            ops.push(attention_train::combine_op(combine, tiles_out, out, None));
        }
        Ok(ops)
    }
}
