//! Attention over the KV cache: decode (one query token) and causal prompt blocks, with GQA,
//! a sliding window, a scale, an optional tanh soft-cap, and flash-decoding splits.
//!
//! WGSL: `attention/attention.wgsl` + `attention/kv_load_<dtype>.wgsl`, the head dimension an
//! override (`HD`, part of the key: 64, 128 or 256). A workgroup of 256 takes query rows that
//! share one kv head (the heads of a GQA group, for one or more tokens) with head_dim / 8
//! lanes each, and one split of the positions; keys go by in tiles of 16 with an online
//! softmax, so nothing of size n^2 is stored. Prompt blocks give the workgroup 2048 / head_dim
//! rows (each key's loads serve them all); decode gives it 512 / head_dim rows in
//! [`DECODE_KEY_GROUPS`] key groups, each walking its own tiles of the split. With several
//! splits the last workgroup of a row tile to finish merges the splits' records: one
//! dispatch either way. Query t sits at position `pos[pos.offset + t]` and sees
//! keys `(at - window, at]` (all of `[0, at]` when window is 0): a prompt block whose K/V were
//! appended first is causal by position.

use crate::device::Caps;
use crate::error::GpuError;
use crate::kernel::{Kernel, KernelFamily};
use crate::op::Op;
use crate::ops::kv::{self, KvCache, KvDtype, KvLayout};
use crate::pipeline::PipelineKey;
use crate::shader::{BindingKind, Program, ShaderFile, shader_file};
use crate::tensor::{GpuBuffer, GpuTensor, View};

#[cfg(any(test, feature = "parity"))]
mod parity;
#[cfg(any(test, feature = "parity"))]
pub use parity::{Arith, CHECK, Case, Reference, compare};
#[cfg(any(test, feature = "parity"))]
pub(crate) use parity::{Path, compare_on, random_attention};

#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub(crate) struct AttentionParams {
    pub n_tokens: u32,
    pub n_heads: u32,
    pub group: u32,
    pub max_len: u32,
    pub q_offset: u32,
    pub q_stride: u32,
    pub out_offset: u32,
    pub pos_offset: u32,
    pub window: u32,
    pub split_len: u32,
    pub n_splits: u32,
    /// Where the splits' (o, m, l) records start in the splits buffer (after the arrival
    /// counters); unused with one split.
    pub records: u32,
    pub scale: f32,
    /// 0: no soft-cap.
    pub softcap: f32,
    /// The rotating decode variant's ([`crate::ops::attention_rope`]; 0 otherwise): dims
    /// rotated, the norm's eps, where k's and v's rows start.
    pub n_rot: u32,
    pub eps: f32,
    pub k_offset: u32,
    pub v_offset: u32,
    pub _pad: [u32; 2],
}

pub(crate) static ATTENTION: ShaderFile = shader_file!("attention/attention.wgsl");
/// `Params` (the WGSL twin of [`AttentionParams`]), the bindings every attention kernel has
/// and `row_keys`: shared by attention.wgsl and attention_coop.wgsl.
pub(crate) static PARAMS: ShaderFile = shader_file!("attention/params.wgsl");
/// The query hook that reads q as it is (and binds the caches read-only).
static Q_PLAIN: ShaderFile = shader_file!("attention/q_plain.wgsl");
/// The entry point and tile reduction through workgroup memory (any device).
static ENTRY_PLAIN: ShaderFile = shader_file!("attention/entry_plain.wgsl");
/// The same through subgroup shuffles ([`in_subgroups`]).
static ENTRY_SUBGROUP: ShaderFile = shader_file!("attention/entry_subgroup.wgsl");

/// q, the caches, the positions, out; then (after the rotating variant's 6..=10) the splits
/// buffer at 11.
const BINDINGS: &[BindingKind] = &[
    BindingKind::Uniform,
    BindingKind::StorageRead,
    BindingKind::StorageRead,
    BindingKind::StorageRead,
    BindingKind::StorageRead,
    BindingKind::StorageReadWrite,
    BindingKind::Absent,
    BindingKind::Absent,
    BindingKind::Absent,
    BindingKind::Absent,
    BindingKind::Absent,
    BindingKind::StorageReadWrite,
];

/// Invocations of every attention workgroup.
pub(crate) const WORKGROUP: u32 = 256;
/// Key groups of a workgroup over few rows (decode): 4 groups of 64 invocations take 512 /
/// head_dim rows each and walk tiles g, g + 4, .. of the split, so a split is 4 tiles wide
/// (a quarter of the splits to merge at the end) for the latency of one.
pub const DECODE_KEY_GROUPS: u32 = 4;
/// Keys a key group takes at once (`BK` in attention/attention.wgsl).
pub const KEY_TILE: usize = 16;
/// Splits of one step: the last workgroup reads every split's record (empty ones too), so
/// [`Attention::n_splits`] is kept at most this.
pub const MAX_SPLITS: usize = 256;
/// Head dimensions the kernel takes (8 dims per lane, a row's lanes divide 64).
pub const HEAD_DIMS: [usize; 3] = [64, 128, 256];

/// Positions per split for a decode step over a cache of `max_len` (flash-decoding: the
/// history is shared by many workgroups; a prompt block attends in one pass). A key group
/// walks its tiles of [`KEY_TILE`] keys serially, so short splits make decode fast: at 256
/// positions a 1,050-position gemma-3-270m cache ran on 10 workgroups and took 99 us a
/// layer on the H100; one tile a split (16) halved each workgroup's walk against 32. A
/// decode workgroup's key groups take a tile each at once, so a split is one tile for each.
/// At most 128 splits keep the merge (the last workgroup reads every split's record) short
/// for long contexts.
pub fn decode_split_len(max_len: usize) -> usize {
    let tiles = DECODE_KEY_GROUPS as usize * KEY_TILE;
    max_len.div_ceil(128).max(tiles)
}

/// Whether a head of `head_dim` sums its tile's scores through subgroup shuffles on a device
/// with `caps`: subgroups of one size S, a row's head_dim / 8 lanes within one (S at least
/// that) and S dividing a key group, so the lanes of a row are an aligned block of one
/// subgroup (`attention/entry_subgroup.wgsl`); else through workgroup memory.
pub fn in_subgroups(caps: &Caps, head_dim: u32) -> bool {
    let s = caps.subgroup_min_size;
    caps.subgroup
        && s == caps.subgroup_max_size
        && s >= (head_dim / 8).max(1)
        && (WORKGROUP / DECODE_KEY_GROUPS).is_multiple_of(s)
}

/// The entry file: subgroup shuffles or workgroup memory, with its program-name suffix.
pub(crate) fn entry(subgroup: bool) -> (&'static ShaderFile, &'static str) {
    match subgroup {
        true => (&ENTRY_SUBGROUP, "_sg"),
        false => (&ENTRY_PLAIN, ""),
    }
}

/// The attention kernel: its cache type, `HD` = head_dim and `KEY_GROUPS` = key_groups (1 for
/// prompt blocks, [`DECODE_KEY_GROUPS`] for few rows) overrides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AttentionKernel {
    /// The cache's element type.
    pub kv: KvDtype,
    /// `HD`: the head dimension.
    pub head_dim: u32,
    /// `KEY_GROUPS`: key groups a workgroup takes ([`Attention::key_groups`]).
    pub key_groups: u32,
}

impl KernelFamily for AttentionKernel {
    /// Head dim 128 stands for every head dim (an override: one program for all).
    fn variants() -> Vec<AttentionKernel> {
        let mut all = Vec::new();
        for kv in [KvDtype::F32, KvDtype::F16] {
            for key_groups in [1, DECODE_KEY_GROUPS] {
                all.push(AttentionKernel {
                    kv,
                    head_dim: 128,
                    key_groups,
                });
            }
        }
        all
    }

    fn program(self) -> Program {
        program(self.kv, false)
    }

    fn programs(self) -> Vec<Program> {
        vec![program(self.kv, false), program(self.kv, true)]
    }

    fn program_for(self, caps: &Caps) -> Program {
        program(self.kv, in_subgroups(caps, self.head_dim))
    }

    fn constants(self) -> Vec<(&'static str, f64)> {
        vec![
            ("HD", f64::from(self.head_dim)),
            ("KEY_GROUPS", f64::from(self.key_groups)),
        ]
    }

    fn pipeline_keys(self) -> Vec<PipelineKey> {
        vec![PipelineKey::new(self, WORKGROUP)]
    }

    #[cfg(any(test, feature = "parity"))]
    fn checks() -> Vec<crate::parity::Check> {
        vec![CHECK]
    }
}

fn program(kv: KvDtype, subgroup: bool) -> Program {
    let (entry, suffix) = entry(subgroup);
    Program {
        name: format!("attention_{}{suffix}", kv.name()),
        files: vec![&ATTENTION, entry, &PARAMS, &Q_PLAIN, kv::load_file(kv)],
        entry: "main",
        bindings: BINDINGS,
        params_size: size_of::<AttentionParams>(),
    }
}

/// One attention call: `n_tokens` query tokens of `n_heads` heads against a layer's cache.
#[derive(Debug, Clone, Copy)]
pub struct Attention {
    /// Query tokens, at consecutive positions.
    pub n_tokens: usize,
    /// Query heads (a multiple of the cache's kv heads).
    pub n_heads: usize,
    /// Elements from one token's q row to the next's (`n_heads * head_dim`, or the fused
    /// qkv row width).
    pub q_stride: usize,
    /// Multiplies `q·k`.
    pub scale: f32,
    /// `c` in `c * tanh(s / c)`; 0 for none.
    pub softcap: f32,
    /// Keys in `(at - window, at]`; 0 for all of `[0, at]`.
    pub window: usize,
    /// Positions per split (a workgroup's share of the cache). `>= max_len`: one split.
    /// Decode over a long cache wants several (e.g. 64) so that many workgroups share the
    /// history.
    pub split_len: usize,
}

impl Attention {
    /// Splits of the cache `l` the call's workgroups share.
    pub fn n_splits(&self, l: &KvLayout) -> usize {
        l.max_len
            .div_ceil(self.split_len.clamp(1, l.max_len.max(1)))
    }

    /// Key groups a workgroup takes: one once a kv head has rows (tokens x GQA group) enough
    /// to fill it (prompt blocks), else [`DECODE_KEY_GROUPS`].
    pub fn key_groups(&self, l: &KvLayout) -> u32 {
        let rows = self.n_tokens * (self.n_heads / l.n_kv_heads.max(1));
        if rows >= WORKGROUP as usize * 8 / l.head_dim.max(1) {
            1
        } else {
            DECODE_KEY_GROUPS
        }
    }

    /// Row tiles of one kv head (workgroups along the grid's y) with `key_groups`.
    fn tiles(&self, l: &KvLayout, key_groups: u32) -> usize {
        let rows = (WORKGROUP / key_groups) as usize * 8 / l.head_dim.max(1);
        (self.n_tokens * (self.n_heads / l.n_kv_heads.max(1))).div_ceil(rows)
    }

    /// Arrival counters at the start of the splits buffer: one per row tile and kv head
    /// (as many as the most tiles, [`DECODE_KEY_GROUPS`]'s, give).
    fn counters(&self, l: &KvLayout) -> usize {
        self.tiles(l, DECODE_KEY_GROUPS) * l.n_kv_heads
    }

    /// u32 words of the splits buffer [`Attention::ops`] needs (0: one split, none): the
    /// arrival counters, then each split's (o, m, l) record per (token, head). It must start
    /// zeroed and be no other op's: the ops leave the counters at zero for the next run.
    pub fn splits_len(&self, l: &KvLayout) -> usize {
        let s = self.n_splits(l);
        if s > 1 {
            self.counters(l) + self.n_tokens * self.n_heads * s * (l.head_dim + 2)
        } else {
            0
        }
    }

    /// `out[out.offset + (t * n_heads + h) * head_dim ..]` = attention of head h of token t
    /// (q at `q.offset + t * q_stride + h * head_dim`). One op; `splits` (of
    /// [`Attention::splits_len`] words) when there are several splits.
    pub fn ops(
        &self,
        q: View<'_>,
        pos: View<'_>,
        cache: &KvCache,
        out: View<'_>,
        splits: Option<&GpuTensor>,
    ) -> Result<Vec<Op>, GpuError> {
        let kg = self.key_groups(&cache.layout);
        self.ops_with(kg, q, pos, cache, out, splits)
    }

    /// [`Attention::ops`] with `key_groups` (1 or [`DECODE_KEY_GROUPS`]), for benches that
    /// compare the two.
    pub fn ops_with(
        &self,
        key_groups: u32,
        q: View<'_>,
        pos: View<'_>,
        cache: &KvCache,
        out: View<'_>,
        splits: Option<&GpuTensor>,
    ) -> Result<Vec<Op>, GpuError> {
        self.build(key_groups, q, pos, cache, out, splits, None)
    }

    /// The op of [`Attention::ops_with`]; with `fold`, the rotating decode variant (its
    /// kernel, parameters and the buffers bound after the plain ones).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn build(
        &self,
        key_groups: u32,
        q: View<'_>,
        pos: View<'_>,
        cache: &KvCache,
        out: View<'_>,
        splits: Option<&GpuTensor>,
        fold: Option<Fold<'_>>,
    ) -> Result<Vec<Op>, GpuError> {
        let l = cache.layout;
        let shape_err = |detail: String| GpuError::Shape {
            op: "attention",
            detail,
        };
        if key_groups != 1 && key_groups != DECODE_KEY_GROUPS {
            return Err(shape_err(format!(
                "{key_groups} key groups (1 or {DECODE_KEY_GROUPS})"
            )));
        }
        if !HEAD_DIMS.contains(&l.head_dim) {
            return Err(shape_err(format!(
                "head_dim {} (one of {HEAD_DIMS:?})",
                l.head_dim
            )));
        }
        if self.n_heads == 0 || !self.n_heads.is_multiple_of(l.n_kv_heads) {
            return Err(shape_err(format!(
                "{} query heads over {} kv heads",
                self.n_heads, l.n_kv_heads
            )));
        }
        let hd = l.head_dim;
        let span = self.n_tokens.saturating_sub(1) * self.q_stride + self.n_heads * hd;
        q.check("attention q", span)?;
        pos.check("attention pos", self.n_tokens)?;
        out.check("attention out", self.n_tokens * self.n_heads * hd)?;
        let n_splits = self.n_splits(&l);
        if n_splits > MAX_SPLITS {
            return Err(GpuError::InvalidParams {
                op: "attention",
                detail: format!(
                    "{n_splits} splits of {} positions (at most {MAX_SPLITS})",
                    self.split_len
                ),
            });
        }
        let group = self.n_heads / l.n_kv_heads;
        let tiles = self.tiles(&l, key_groups);
        let mut params = AttentionParams {
            n_tokens: self.n_tokens as u32,
            n_heads: self.n_heads as u32,
            group: group as u32,
            max_len: l.max_len as u32,
            q_offset: q.offset as u32,
            q_stride: self.q_stride as u32,
            out_offset: out.offset as u32,
            pos_offset: pos.offset as u32,
            window: self.window as u32,
            split_len: l.max_len.div_ceil(n_splits) as u32,
            n_splits: n_splits as u32,
            records: self.counters(&l) as u32,
            scale: self.scale,
            softcap: self.softcap,
            n_rot: 0,
            eps: 0.0,
            k_offset: 0,
            v_offset: 0,
            _pad: [0; 2],
        };
        let grid = [n_splits as u32, tiles as u32, l.n_kv_heads as u32];
        let mut kernel = Kernel::from(AttentionKernel {
            kv: l.dtype,
            head_dim: hd as u32,
            key_groups,
        });
        let mut extra: Vec<&GpuBuffer> = Vec::new();
        if let Some(f) = &fold {
            kernel = f.kernel;
            params.n_rot = f.n_rot;
            params.eps = f.eps;
            params.k_offset = f.k_offset;
            params.v_offset = f.v_offset;
            extra = f.buffers.clone();
        }
        // One split never touches binding 11: it binds out's buffer there (writable storage
        // bindings of one buffer may alias).
        let splits = if n_splits == 1 {
            &out.t.buf
        } else {
            let splits =
                splits.ok_or_else(|| shape_err("several splits need a splits buffer".into()))?;
            View::from(splits).check("attention splits", self.splits_len(&l))?;
            &splits.buf
        };
        let mut buffers = vec![&q.t.buf, &cache.k.buf, &cache.v.buf, &pos.t.buf, &out.t.buf];
        buffers.extend(extra.iter().copied());
        buffers.push(splits);
        Ok(vec![Op::new(kernel, WORKGROUP, &params, &buffers, grid)])
    }
}

/// What the rotating decode variant changes in [`Attention::build`]'s op.
#[derive(Debug, Clone)]
pub(crate) struct Fold<'a> {
    pub kernel: Kernel,
    pub n_rot: u32,
    pub eps: f32,
    pub k_offset: u32,
    pub v_offset: u32,
    /// k, v, freqs, wq, wk (bindings 6..=10).
    pub buffers: Vec<&'a GpuBuffer>,
}
