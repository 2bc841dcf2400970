//! The decode attention with `head_norm_rope_kv` folded in: one token's q and k normed (where
//! they carry weights) and rotated in registers, the finished k head and the v head stored
//! into the layer's KV cache by the workgroups whose split holds the token's position, then
//! the attention as [`Attention`] runs it. One dispatch fewer a layer in decode than
//! `head_norm_rope_kv` + `attention`; q and k are not written back.
//!
//! WGSL: the attention's files (`attention/attention.wgsl`, `attention/kv_load_<dtype>.wgsl`)
//! with the query hook `attention/q_rope.wgsl` for `attention/q_plain.wgsl`, the per-element
//! norm and rotation of `rope/rotate.wgsl` (shared with `head_norm_rope`) and kv_append's
//! store (`attention/kv_store_<dtype>.wgsl`). The norm's sum of squares is formed in
//! head_norm_rope's order, so q, k and the cache come out as that kernel leaves them and the
//! output as `head_norm_rope_kv` then `attention` give it, bit for bit where the compiler
//! rounds the shared functions alike in both programs (the test
//! `equals_head_norm_rope_kv_then_attention`; lavapipe: every case).

use crate::device::Caps;
use crate::error::GpuError;
use crate::kernel::KernelFamily;
use crate::op::Op;
use crate::ops::attention::{self, ATTENTION, Attention, Fold};
use crate::ops::head_norm_rope::ROTATE;
use crate::ops::kv::{self, KvCache, KvDtype};
use crate::ops::rope::RopeStyle;
use crate::pipeline::PipelineKey;
use crate::shader::{BindingKind, Program, ShaderFile, shader_file};
use crate::tensor::{GpuTensor, View};

#[cfg(any(test, feature = "parity"))]
mod parity;
#[cfg(any(test, feature = "parity"))]
pub use parity::CHECK;

/// The query hook that norms and rotates q and k and stores k and v through workgroup
/// memory (any rotary).
static Q_ROPE: ShaderFile = shader_file!("attention/q_rope.wgsl");
/// The same in registers, for rotaries whose every pair lies within one lane ([`in_lanes`]).
static Q_ROPE_LANES: ShaderFile = shader_file!("attention/q_rope_lanes.wgsl");
/// The hooks' bindings and overrides.
static ROPE_BINDINGS: ShaderFile = shader_file!("attention/rope_bindings.wgsl");

/// The attention's bindings (the caches read-write: the hook stores into them), then k, v,
/// freqs, wq, wk, then the splits buffer.
const BINDINGS: &[BindingKind] = &[
    BindingKind::Uniform,
    BindingKind::StorageRead,
    BindingKind::StorageReadWrite,
    BindingKind::StorageReadWrite,
    BindingKind::StorageRead,
    BindingKind::StorageReadWrite,
    BindingKind::StorageRead,
    BindingKind::StorageRead,
    BindingKind::StorageRead,
    BindingKind::StorageRead,
    BindingKind::StorageRead,
    BindingKind::StorageReadWrite,
];

/// Whether the key loop's lanes hold whole rotation pairs of a head of `head_dim` whose first
/// `n_rot` dims rotate: a lane holds dims 4 l .. 4 l + 3 and head_dim/2 + 4 l .. + 3, so
/// NeoX pairs (j, j + n_rot/2) stay in a lane only over the whole head, normal pairs
/// (2j, 2j + 1) always. Then the hook `attention/q_rope_lanes.wgsl` norms and rotates in
/// registers (one barrier with norms, none without) instead of through workgroup memory.
pub fn in_lanes(style: RopeStyle, n_rot: usize, head_dim: usize) -> bool {
    style == RopeStyle::Normal || n_rot == head_dim
}

/// The rotating decode attention: its cache type, `HD` = head_dim, the rotation (`NEOX`),
/// the q/k norm (`NORM`), where the hook rotates, and `KEY_GROUPS`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AttentionRopeKernel {
    /// The cache's element type.
    pub kv: KvDtype,
    /// `HD`: the head dimension.
    pub head_dim: u32,
    /// `NEOX`: which dimensions form a rotated pair.
    pub style: RopeStyle,
    /// `NORM`: q and k normed (per head, weighted) before the rotation.
    pub norm: bool,
    /// Every rotation pair within a lane ([`in_lanes`]): the hook in registers.
    pub lanes: bool,
    /// `KEY_GROUPS`: key groups a workgroup takes ([`Attention::key_groups`]).
    pub key_groups: u32,
}

impl KernelFamily for AttentionRopeKernel {
    /// Head dim 128 stands for every head dim (an override: one program for all).
    fn variants() -> Vec<AttentionRopeKernel> {
        let mut all = Vec::new();
        for kv in [KvDtype::F32, KvDtype::F16] {
            for key_groups in [1, attention::DECODE_KEY_GROUPS] {
                for style in [RopeStyle::Normal, RopeStyle::Neox] {
                    for norm in [false, true] {
                        for lanes in [false, true] {
                            all.push(AttentionRopeKernel {
                                kv,
                                head_dim: 128,
                                style,
                                norm,
                                lanes,
                                key_groups,
                            });
                        }
                    }
                }
            }
        }
        all
    }

    fn program(self) -> Program {
        program(self.kv, self.norm, self.lanes, false)
    }

    fn programs(self) -> Vec<Program> {
        let AttentionRopeKernel {
            kv, norm, lanes, ..
        } = self;
        vec![
            program(kv, norm, lanes, false),
            program(kv, norm, lanes, true),
        ]
    }

    fn program_for(self, caps: &Caps) -> Program {
        let subgroup = attention::in_subgroups(caps, self.head_dim);
        program(self.kv, self.norm, self.lanes, subgroup)
    }

    fn constants(self) -> Vec<(&'static str, f64)> {
        vec![
            ("HD", f64::from(self.head_dim)),
            ("NEOX", self.style.code()),
            ("NORM", f64::from(u8::from(self.norm))),
            ("KEY_GROUPS", f64::from(self.key_groups)),
        ]
    }

    fn pipeline_keys(self) -> Vec<PipelineKey> {
        vec![PipelineKey::new(self, attention::WORKGROUP)]
    }

    #[cfg(any(test, feature = "parity"))]
    fn checks() -> Vec<crate::parity::Check> {
        vec![CHECK]
    }
}

fn program(kv: KvDtype, norm: bool, lanes: bool, subgroup: bool) -> Program {
    let name = match (norm, lanes) {
        (true, false) => "attention_norm_rope",
        (false, false) => "attention_rope",
        (true, true) => "attention_norm_rope_lanes",
        (false, true) => "attention_rope_lanes",
    };
    let (entry, suffix) = attention::entry(subgroup);
    Program {
        name: format!("{name}_{}{suffix}", kv.name()),
        files: vec![
            &ATTENTION,
            entry,
            &attention::PARAMS,
            &ROPE_BINDINGS,
            if lanes { &Q_ROPE_LANES } else { &Q_ROPE },
            &ROTATE,
            kv::load_file(kv),
            kv::store_file(kv),
        ],
        entry: "main",
        bindings: BINDINGS,
        params_size: size_of::<attention::AttentionParams>(),
    }
}

/// One decode token's attention with its q/k norm, RoPE and K/V store.
#[derive(Debug, Clone, Copy)]
pub struct AttentionRope {
    /// `n_tokens` must be 1 (a prompt block's later tokens read earlier tokens' keys, which
    /// other workgroups would store).
    pub attn: Attention,
    /// Which dims of a head pair up.
    pub style: RopeStyle,
    /// Dims rotated (even, at most head_dim).
    pub n_rot: usize,
    /// The per-head norm's eps.
    pub eps: f32,
}

/// The token's k and v rows (kv heads of head_dim at the view's offset), the per-head norm
/// weights of q and k (both or neither), and the frequencies of [`crate::ops::rope::rope_freqs`].
#[derive(Debug, Clone, Copy)]
pub struct Rotate<'a> {
    /// The token's k heads.
    pub k: View<'a>,
    /// The token's v heads.
    pub v: View<'a>,
    /// q's per-head norm weights.
    pub wq: Option<&'a GpuTensor>,
    /// k's per-head norm weights.
    pub wk: Option<&'a GpuTensor>,
    /// The RoPE frequencies.
    pub freqs: &'a GpuTensor,
}

impl AttentionRope {
    fn shape_error(detail: String) -> GpuError {
        GpuError::Shape {
            op: "attention_rope",
            detail,
        }
    }

    /// `out` = attention of q (heads at `q.offset + h * head_dim`, normed and rotated at
    /// position `pos[pos.offset]`) over `cache`, after the token's finished k heads and v
    /// heads were stored at that position (dropped past the cache). One op; `splits` as
    /// [`Attention::ops`] takes it.
    pub fn ops(
        &self,
        q: View<'_>,
        rot: Rotate<'_>,
        pos: View<'_>,
        cache: &KvCache,
        out: View<'_>,
        splits: Option<&GpuTensor>,
    ) -> Result<Vec<Op>, GpuError> {
        let l = cache.layout;
        let hd = l.head_dim;
        if self.attn.n_tokens != 1 {
            return Err(Self::shape_error(format!(
                "{} tokens (one: decode)",
                self.attn.n_tokens
            )));
        }
        if !self.n_rot.is_multiple_of(2) || self.n_rot > hd {
            return Err(Self::shape_error(format!(
                "n_rot {} with head_dim {hd}",
                self.n_rot
            )));
        }
        if rot.wq.is_some() != rot.wk.is_some() {
            return Err(Self::shape_error(
                "q and k must both have a norm weight or neither".into(),
            ));
        }
        let row = l.n_kv_heads * hd;
        rot.k.check("attention_rope k", row)?;
        rot.v.check("attention_rope v", row)?;
        View::from(rot.freqs).check("attention_rope freqs", self.n_rot / 2)?;
        for w in [rot.wq, rot.wk].into_iter().flatten() {
            View::from(w).check("attention_rope weight", hd)?;
        }
        let wq = rot.wq.map_or(&rot.freqs.buf, |w| &w.buf);
        let wk = rot.wk.map_or(wq, |w| &w.buf);
        // One count for the kernel's override and the op's grid.
        let key_groups = self.attn.key_groups(&l);
        let fold = Fold {
            kernel: AttentionRopeKernel {
                kv: l.dtype,
                head_dim: hd as u32,
                style: self.style,
                norm: rot.wq.is_some(),
                lanes: in_lanes(self.style, self.n_rot, hd),
                key_groups,
            }
            .into(),
            n_rot: self.n_rot as u32,
            eps: self.eps,
            k_offset: rot.k.offset as u32,
            v_offset: rot.v.offset as u32,
            buffers: vec![&rot.k.t.buf, &rot.v.t.buf, &rot.freqs.buf, wq, wk],
        };
        self.attn
            .build(key_groups, q, pos, cache, out, splits, Some(fold))
    }
}
