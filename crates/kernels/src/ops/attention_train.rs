//! Causal attention without a KV cache, for training: the forward, which also keeps each
//! (row, head)'s log-sum-exp for the backward ([`crate::ops::attention_backward`]).
//!
//! The block holds `n` rows, one or more sequences laid end to end: `start[i]` is the first
//! row of row i's sequence, so packed and padded batches both work. Row i sees key rows j
//! with `start[i] <= j <= i` and, with a sliding window w, `i - j < w`. Query head h reads kv
//! head `h / (n_head / n_kv)` (GQA). With `s_ij = cap(scale q_i . k_j)`, `cap(x) = c tanh(x /
//! c)` (or x without a soft-cap),
//!
//! ```text
//! lse_i = log sum_j exp(s_ij)        o_i = sum_j exp(s_ij - lse_i) v_j
//! ```
//!
//! over the keys row i sees, per query head. Layouts, row-major f32: q `[n, n_head * dk]`,
//! k `[n, n_kv * dk]`, v `[n, n_kv * dv]`, o `[n, n_head * dv]`, lse `[n, n_head]`, start
//! `[n]` u32; a row's heads are consecutive column groups.
//!
//! Memory: besides the inputs and o, only lse, `n * n_head` floats; nothing of size n^2.
//! WGSL: `attention/train_forward.wgsl` with `attention/train_tiles.wgsl` and
//! `attention/train_params.wgsl`. As flash attention: one workgroup of 256 per (tile of 32
//! (row, head) pairs of one kv head, kv head, 256 output columns) walks the keys its rows see in
//! tiles of 32, the 32 x 32 scores through workgroup memory, with an online softmax (the
//! running max and sum, the accumulators rescaled when the max grows); a key row read serves
//! 32 pairs (under GQA the pairs are a kv head's query heads side by side). Head dims up to
//! [`MAX_HEAD_DIM`]; wider than 256 columns, grid z walks the columns and recomputes the
//! scores. [`TrainAttention::forward_split_ops`] also splits each pair tile's keys over grid z
//! and combines the splits' partial results (`attention/train_combine.wgsl`), for blocks with
//! few pair tiles.

use crate::error::GpuError;
use crate::kernel::KernelFamily;
use crate::op::{Op, grid_1d};
use crate::ops::attention_train_coop::CoopPass;
use crate::pipeline::PipelineKey;
use crate::shader::{BindingKind, Program, ShaderFile, shader_file};
use crate::tensor::View;

#[cfg(any(test, feature = "parity"))]
mod parity;
#[cfg(any(test, feature = "parity"))]
pub use parity::{CHECK, attention_train_ref};
#[cfg(any(test, feature = "parity"))]
pub(crate) use parity::{Inputs, compare_with, dot, padded, score_bound};

/// The largest head dimension (dk or dv) the kernels take (`MAXD` in
/// attention/train_params.wgsl).
pub const MAX_HEAD_DIM: usize = 512;

/// Invocations of every training attention workgroup (`WG` in attention/train_tiles.wgsl,
/// whose tile mappings assume it).
pub(crate) const WORKGROUP: u32 = 256;

/// (Row, head) pairs and keys per tile (`BQ`, `BK` in attention/train_tiles.wgsl).
const TILE: usize = 32;

/// Output columns per workgroup (`COLS` in attention/train_tiles.wgsl).
const COLS: usize = 256;

/// One training attention call over a block of rows (see the module docs for the maths).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TrainAttention {
    /// Rows of the block (tokens, all sequences together).
    pub n: usize,
    /// Query heads.
    pub n_head: usize,
    /// Key/value heads (dividing `n_head`: GQA groups of `n_head / n_kv`).
    pub n_kv: usize,
    /// Query and key head dimension.
    pub dk: usize,
    /// Value (and output) head dimension.
    pub dv: usize,
    /// Multiplies q . k before the soft-cap.
    pub scale: f32,
    /// Sliding window: row i sees keys j with `i - j < window`; 0 for none.
    pub window: usize,
    /// Soft-cap c of the scores, `c tanh(s / c)`; 0 for none.
    pub softcap: f32,
}

/// The WGSL `Params` of attention/train_params.wgsl, shared by the forward and both
/// backward programs (each reads the offsets it binds).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Default, bytemuck::Pod, bytemuck::Zeroable)]
pub(crate) struct TrainAttentionParams {
    pub n: u32,
    pub n_head: u32,
    pub n_kv: u32,
    pub dk: u32,
    pub dv: u32,
    pub window: u32,
    pub scale: f32,
    pub softcap: f32,
    pub q_offset: u32,
    pub k_offset: u32,
    pub v_offset: u32,
    pub o_offset: u32,
    pub lse_offset: u32,
    pub do_offset: u32,
    pub start_offset: u32,
    pub dq_offset: u32,
    pub dk_offset: u32,
    pub dv_offset: u32,
    /// The forward's and the dq program's splits of each pair tile's keys (1 unsplit).
    pub key_splits: u32,
    /// The dk/dv program's splits of each key tile's pairs (1 unsplit).
    pub pair_splits: u32,
}

pub(crate) static PARAMS: ShaderFile = shader_file!("attention/train_params.wgsl");
pub(crate) static TILES: ShaderFile = shader_file!("attention/train_tiles.wgsl");
/// `split_share`: how a kernel that splits a tile's keys (or pairs) over the grid's z shares
/// them out.
pub(crate) static SPLIT_SHARE: ShaderFile = shader_file!("attention/split_share.wgsl");
static FORWARD: ShaderFile = shader_file!("attention/train_forward.wgsl");

/// q, k, v, start read; o, lse written.
pub(crate) const BINDINGS: &[BindingKind] = &[
    BindingKind::Uniform,
    BindingKind::StorageRead,
    BindingKind::StorageRead,
    BindingKind::StorageRead,
    BindingKind::StorageRead,
    BindingKind::StorageReadWrite,
    BindingKind::StorageReadWrite,
];

/// The training attention forward's kernels (every shape a parameter).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AttentionTrainKernel {
    /// The tiles: o and lse, or with split keys each split's partial results.
    Forward,
    /// The split keys' partial results combined into o and lse.
    Combine,
}

static COMBINE: ShaderFile = shader_file!("attention/train_combine.wgsl");

/// parts read; o, lse written.
const COMBINE_BINDINGS: &[BindingKind] = &[
    BindingKind::Uniform,
    BindingKind::StorageRead,
    BindingKind::StorageReadWrite,
    BindingKind::StorageReadWrite,
];

/// The WGSL `Params` of attention/train_combine.wgsl.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
struct CombineParams {
    rows: u32,
    dv: u32,
    splits: u32,
    acc_offset: u32,
    ml_offset: u32,
    o_offset: u32,
    lse_offset: u32,
    _pad: u32,
}

/// `lse_offset` of a combine that writes no lse (attention/train_combine.wgsl's `NO_LSE`).
const NO_LSE: u32 = u32::MAX;

/// The shape of a split attention's partial results: `splits` slices of `rows` x `dv`
/// unnormalised outputs, then the splits' maxima, then their sums (`rows` each).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Combine {
    pub rows: usize,
    pub dv: usize,
    pub splits: usize,
}

impl Combine {
    /// Elements of the partial results (0 for one split: nothing to combine).
    pub fn len(&self) -> usize {
        match self.splits {
            0 | 1 => 0,
            s => s * self.rows * (self.dv + 2),
        }
    }

    /// Where the maxima start in `parts`' tensor (the sums follow them).
    pub fn ml_offset(&self, parts: View<'_>) -> usize {
        parts.offset + self.splits * self.rows * self.dv
    }

    /// That `scratch` (called `name` in a shape error of op `op`) holds the partial results
    /// ([`Combine::len`] elements within u32 indices) in another tensor than the `outputs`
    /// the combine writes.
    pub fn check_scratch(
        &self,
        (op, name): (&'static str, &'static str),
        scratch: View<'_>,
        outputs: &[View<'_>],
    ) -> Result<(), GpuError> {
        scratch.check(name, self.len())?;
        if outputs.iter().any(|o| o.t.buf.id() == scratch.t.buf.id()) {
            return Err(GpuError::InvalidParams {
                op,
                detail: "the split scratch in an output's tensor".into(),
            });
        }
        let end = scratch.offset + self.len();
        if end > u32::MAX as usize {
            return Err(GpuError::InvalidParams {
                op,
                detail: format!("{end} scratch elements past u32 indices"),
            });
        }
        Ok(())
    }
}

/// The op that combines split keys' partial results (attention/train_combine.wgsl): laid out
/// in `parts` as [`Combine`] says, into `o` and, where given, the rows' log-sum-exp into
/// `lse` (the training forward keeps it for the backward; the prompt attention has no use for
/// it). The caller checks the views ([`Combine::check_scratch`]).
pub(crate) fn combine_op(c: Combine, parts: View<'_>, o: View<'_>, lse: Option<View<'_>>) -> Op {
    let params = CombineParams {
        rows: c.rows as u32,
        dv: c.dv as u32,
        splits: c.splits as u32,
        acc_offset: parts.offset as u32,
        ml_offset: c.ml_offset(parts) as u32,
        o_offset: o.offset as u32,
        lse_offset: lse.map_or(NO_LSE, |l| l.offset as u32),
        _pad: 0,
    };
    // Without an lse its binding takes o's buffer, which the kernel then never writes there.
    let lse_buf = lse.map_or(&o.t.buf, |l| &l.t.buf);
    Op::new(
        AttentionTrainKernel::Combine,
        WORKGROUP,
        &params,
        &[&parts.t.buf, &o.t.buf, lse_buf],
        grid_1d((c.rows * c.dv).div_ceil(WORKGROUP as usize)),
    )
}

impl KernelFamily for AttentionTrainKernel {
    fn variants() -> Vec<AttentionTrainKernel> {
        vec![AttentionTrainKernel::Forward, AttentionTrainKernel::Combine]
    }

    fn program(self) -> Program {
        match self {
            AttentionTrainKernel::Forward => Program {
                name: "attention_train".to_string(),
                files: vec![&FORWARD, &TILES, &PARAMS, &SPLIT_SHARE],
                entry: "main",
                bindings: BINDINGS,
                params_size: size_of::<TrainAttentionParams>(),
            },
            AttentionTrainKernel::Combine => Program {
                name: "attention_train_combine".to_string(),
                files: vec![&COMBINE],
                entry: "main",
                bindings: COMBINE_BINDINGS,
                params_size: size_of::<CombineParams>(),
            },
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

/// The forward's views: its inputs and where its outputs go.
#[derive(Debug, Clone, Copy)]
pub struct TrainAttentionForward<'a> {
    /// `[n, n_head * dk]`.
    pub q: View<'a>,
    /// `[n, n_kv * dk]`.
    pub k: View<'a>,
    /// `[n, n_kv * dv]`.
    pub v: View<'a>,
    /// `[n]` u32: the first row of each row's sequence (`start[i] <= i`: a row sees at least
    /// itself; the kernels cannot check data on the GPU).
    pub start: View<'a>,
    /// Receives o, `[n, n_head * dv]`.
    pub o: View<'a>,
    /// Receives the log-sum-exp of each (row, head)'s scores, `[n, n_head]`.
    pub lse: View<'a>,
}

impl TrainAttention {
    /// Checks the shape against what the kernels implement: at least one row and head, kv
    /// heads dividing the query heads, head dims in `1..=MAX_HEAD_DIM`, finite scale and
    /// non-negative soft-cap, and every element index below 2^32.
    pub(crate) fn validate(&self, op: &'static str) -> Result<(), GpuError> {
        let bad = |detail: String| Err(GpuError::InvalidParams { op, detail });
        if self.n == 0 || self.n_head == 0 || self.n_kv == 0 {
            return bad(format!(
                "n {}, n_head {}, n_kv {}: each must be at least 1",
                self.n, self.n_head, self.n_kv
            ));
        }
        if !self.n_head.is_multiple_of(self.n_kv) {
            return bad(format!(
                "n_kv {} does not divide n_head {}",
                self.n_kv, self.n_head
            ));
        }
        for (name, d) in [("dk", self.dk), ("dv", self.dv)] {
            if d == 0 || d > MAX_HEAD_DIM {
                return bad(format!("{name} {d} outside 1..={MAX_HEAD_DIM}"));
            }
        }
        if !(self.scale.is_finite() && self.softcap >= 0.0 && self.softcap.is_finite()) {
            return bad(format!(
                "scale {} must be finite and softcap {} finite and >= 0",
                self.scale, self.softcap
            ));
        }
        let widest = self.n * self.n_head * self.dk.max(self.dv);
        if widest > u32::MAX as usize {
            return bad(format!("{widest} elements past u32 indices"));
        }
        Ok(())
    }

    /// The parameter block with the sizes set and every offset 0. A window of n rows or more
    /// hides nothing and goes as 0, so the kernels' `j + window` stays below 2^32.
    pub(crate) fn params(&self) -> TrainAttentionParams {
        let window = if self.window >= self.n {
            0
        } else {
            self.window
        };
        TrainAttentionParams {
            n: self.n as u32,
            n_head: self.n_head as u32,
            n_kv: self.n_kv as u32,
            dk: self.dk as u32,
            dv: self.dv as u32,
            window: window as u32,
            scale: self.scale,
            softcap: self.softcap,
            key_splits: 1,
            pair_splits: 1,
            ..TrainAttentionParams::default()
        }
    }

    /// The forward: o and lse from q, k, v and start (layouts in the module docs). The
    /// outputs must be other tensors than the inputs (wgpu forbids one buffer read and
    /// written in a dispatch); o and lse may be views of one tensor, not overlapping.
    pub fn forward_op(&self, b: TrainAttentionForward<'_>) -> Result<Op, GpuError> {
        let mut ops = self.forward_split_ops(b, None, 1)?;
        Ok(ops.remove(0))
    }

    /// Elements of the scratch [`TrainAttention::forward_split_ops`] takes for `splits`.
    pub fn forward_scratch_len(&self, splits: usize) -> usize {
        self.combine(splits).len()
    }

    /// The layout of the forward's partial results split `splits` ways.
    fn combine(&self, splits: usize) -> Combine {
        Combine {
            rows: self.n * self.n_head,
            dv: self.dv,
            splits,
        }
    }

    /// As [`TrainAttention::forward_op`] with each pair tile's keys split `splits` ways in the
    /// dispatch (the grid's z: more workgroups where a block has few pair tiles, and the last
    /// tiles of a sequence, which see all its keys, not walked by one workgroup alone): each
    /// split's unnormalised o, max and sum into its own slices of `scratch`
    /// ([`TrainAttention::forward_scratch_len`] elements, another tensor than o and lse), then
    /// a combine op rescaling them into o and lse (`attention/train_combine.wgsl`). One split
    /// (or no scratch) is the single op of [`TrainAttention::forward_op`].
    pub fn forward_split_ops(
        &self,
        b: TrainAttentionForward<'_>,
        scratch: Option<View<'_>>,
        splits: usize,
    ) -> Result<Vec<Op>, GpuError> {
        self.forward_ops_with(false, b, scratch, splits)
    }

    /// As [`TrainAttention::forward_split_ops`] with the kernel named: `coop` runs the
    /// tensor-core kernel ([`crate::ops::attention_train_coop`]) on any device (on one without
    /// cooperative matrices, its emulated program: tests only), for the shapes
    /// [`TrainAttention::coop_fits`] accepts.
    pub(crate) fn forward_ops_with(
        &self,
        coop: bool,
        b: TrainAttentionForward<'_>,
        scratch: Option<View<'_>>,
        splits: usize,
    ) -> Result<Vec<Op>, GpuError> {
        const OP: &str = "attention_train";
        self.validate(OP)?;
        if coop {
            self.check_coop(OP)?;
        }
        let n = self.n;
        let (o_len, rows) = (n * self.n_head * self.dv, n * self.n_head);
        b.q.check("attention_train q", n * self.n_head * self.dk)?;
        b.k.check("attention_train k", n * self.n_kv * self.dk)?;
        b.v.check("attention_train v", n * self.n_kv * self.dv)?;
        b.start.check("attention_train start", n)?;
        b.o.check("attention_train o", o_len)?;
        b.lse.check("attention_train lse", rows)?;
        let splits = match scratch {
            Some(_) => splits.clamp(1, self.dq_key_tiles()),
            None => 1,
        };
        // Split, the tiles write the partial results into the scratch: o's slices, then the
        // maxima's, then the sums'.
        let combine = self.combine(splits);
        let (o_out, ml_out) = match scratch {
            Some(t) if splits > 1 => {
                combine.check_scratch((OP, "attention_train scratch"), t, &[b.o, b.lse])?;
                (t, View::at(t.t, combine.ml_offset(t)))
            }
            _ => {
                let end = b.lse.offset + 2 * rows;
                if end > u32::MAX as usize {
                    return Err(GpuError::InvalidParams {
                        op: OP,
                        detail: format!("{end} scratch elements past u32 indices"),
                    });
                }
                (b.o, b.lse)
            }
        };
        let params = TrainAttentionParams {
            q_offset: b.q.offset as u32,
            k_offset: b.k.offset as u32,
            v_offset: b.v.offset as u32,
            start_offset: b.start.offset as u32,
            o_offset: o_out.offset as u32,
            lse_offset: ml_out.offset as u32,
            key_splits: splits as u32,
            ..self.params()
        };
        let buffers = [
            &b.q.t.buf,
            &b.k.t.buf,
            &b.v.t.buf,
            &b.start.t.buf,
            &o_out.t.buf,
            &ml_out.t.buf,
        ];
        let forward = match coop {
            true => self.coop_op(CoopPass::Forward, &params, &buffers, splits),
            false => Op::new(
                AttentionTrainKernel::Forward,
                WORKGROUP,
                &params,
                &buffers,
                self.pair_grid(splits),
            ),
        };
        let mut ops = vec![forward];
        if splits > 1 {
            ops.push(combine_op(combine, o_out, b.o, Some(b.lse)));
        }
        Ok(ops)
    }

    /// The grid of the forward and dq programs: a workgroup per (tile of pairs, kv head), per
    /// split of the keys and per COLS columns of the widest head.
    pub(crate) fn pair_grid(&self, splits: usize) -> [u32; 3] {
        let mut grid = self.column_grid(self.dq_workgroups());
        grid[2] *= splits as u32;
        grid
    }

    /// The grid of the dk/dv program: a workgroup per (tile of keys, kv head), per split of
    /// the pairs and per COLS columns of the widest head.
    pub(crate) fn key_grid(&self, splits: usize) -> [u32; 3] {
        let mut grid = self.column_grid(self.dkdv_workgroups());
        grid[2] *= splits as u32;
        grid
    }

    /// The forward's and the dq program's workgroups without splits: one per (tile of 32
    /// (row, head) pairs, kv head).
    pub fn dq_workgroups(&self) -> usize {
        (self.n * (self.n_head / self.n_kv)).div_ceil(TILE) * self.n_kv
    }

    /// The most key tiles one pair tile walks (the dq split count past which splits are
    /// empty).
    pub fn dq_key_tiles(&self) -> usize {
        self.n.div_ceil(TILE)
    }

    /// The dk/dv program's workgroups without splits: one per (tile of 32 keys, kv head).
    pub fn dkdv_workgroups(&self) -> usize {
        self.n.div_ceil(TILE) * self.n_kv
    }

    /// The most pair tiles one key tile walks (the dk/dv split count past which splits are
    /// empty).
    pub fn dkdv_pair_tiles(&self) -> usize {
        (self.n * (self.n_head / self.n_kv)).div_ceil(TILE)
    }

    fn column_grid(&self, groups: usize) -> [u32; 3] {
        let mut grid = grid_1d(groups);
        grid[2] = self.dk.max(self.dv).div_ceil(COLS) as u32;
        grid
    }
}
