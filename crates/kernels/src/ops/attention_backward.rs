//! Backward of the training attention ([`crate::ops::attention_train`]): dq, dk and dv from
//! q, k, v, the forward's o and log-sum-exp, `do = dL/do` and start, as FlashAttention-2's
//! backward. Per query head, over the pairs (i, j) with row i seeing key j:
//!
//! ```text
//! D_i   = do_i . o_i                      p_ij  = exp(s_ij - lse_i)   (recomputed)
//! dp_ij = do_i . v_j                      ds_ij = p_ij (dp_ij - D_i) cap'(scale q_i . k_j)
//! dq_i  = scale sum_j ds_ij k_j           dk_j  = scale sum_i ds_ij q_i
//! dv_j  = sum_i p_ij do_i
//! ```
//!
//! with `cap'(x) = 1 - tanh^2(x / c)` under a soft-cap c (1 without). Under GQA a kv head's
//! dk and dv sum over the query heads of its group. Layouts as the forward's; dq like q, dk
//! like k, dv like v.
//!
//! Memory: nothing besides the inputs and the three gradients, and nothing of size n^2: the
//! weights are recomputed from lse (`n * n_head` floats, kept by the forward). WGSL has no
//! float atomics, so each gradient element has one writer: two dispatches, as
//! FlashAttention-2's backward with its dq pass split off, on the forward's tiles
//! (`attention/train_tiles.wgsl`, the second tile product do . v in
//! `attention/train_backward_tiles.wgsl`): `attention/train_backward_dq.wgsl` (one workgroup
//! per tile of 32 (row, head) pairs walks the keys they see, 32 a tile) and
//! `attention/train_backward_dkdv.wgsl` (one workgroup per tile of 32 key rows walks the pairs
//! that may see them, 32 a tile). D is computed where it is needed, on the way through the
//! do . v product (whose staging reads the do rows anyway), rather than stored. The two passes
//! recompute the scores each: twice the forward's arithmetic.

use crate::device::Caps;
use crate::error::GpuError;
use crate::kernel::KernelFamily;
use crate::op::Op;
use crate::ops::attention_train::{
    PARAMS, SPLIT_SHARE, TILES, TrainAttention, TrainAttentionParams, WORKGROUP,
};
use crate::ops::attention_train_coop::CoopPass;
use crate::ops::split_sum::SplitSum;
use crate::pipeline::PipelineKey;
use crate::shader::{BindingKind, Program, ShaderFile, shader_file};
use crate::tensor::View;

#[cfg(any(test, feature = "parity"))]
pub(crate) mod parity;
#[cfg(any(test, feature = "parity"))]
pub use parity::{CHECK, attention_backward_ref};

static DQ: ShaderFile = shader_file!("attention/train_backward_dq.wgsl");
static DKDV: ShaderFile = shader_file!("attention/train_backward_dkdv.wgsl");
static BACKWARD_TILES: ShaderFile = shader_file!("attention/train_backward_tiles.wgsl");

/// q, k, v, o, lse, do, start read; dq written.
pub(crate) const BINDINGS_DQ: &[BindingKind] = &[
    BindingKind::Uniform,
    BindingKind::StorageRead,
    BindingKind::StorageRead,
    BindingKind::StorageRead,
    BindingKind::StorageRead,
    BindingKind::StorageRead,
    BindingKind::StorageRead,
    BindingKind::StorageRead,
    BindingKind::StorageReadWrite,
];

/// q, k, v, o, lse, do, start read; dk, dv written.
pub(crate) const BINDINGS_DKDV: &[BindingKind] = &[
    BindingKind::Uniform,
    BindingKind::StorageRead,
    BindingKind::StorageRead,
    BindingKind::StorageRead,
    BindingKind::StorageRead,
    BindingKind::StorageRead,
    BindingKind::StorageRead,
    BindingKind::StorageRead,
    BindingKind::StorageReadWrite,
    BindingKind::StorageReadWrite,
];

/// The attention backward's two kernels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AttentionBackwardKernel {
    /// dq: a workgroup per (tile of (row, query head) pairs, kv head).
    Dq,
    /// dk and dv: a workgroup per (tile of key rows, kv head).
    DkDv,
}

impl KernelFamily for AttentionBackwardKernel {
    fn variants() -> Vec<AttentionBackwardKernel> {
        vec![AttentionBackwardKernel::Dq, AttentionBackwardKernel::DkDv]
    }

    fn program(self) -> Program {
        let (name, file, bindings) = match self {
            AttentionBackwardKernel::Dq => ("attention_backward_dq", &DQ, BINDINGS_DQ),
            AttentionBackwardKernel::DkDv => ("attention_backward_dkdv", &DKDV, BINDINGS_DKDV),
        };
        Program {
            name: name.to_string(),
            files: vec![file, &BACKWARD_TILES, &TILES, &PARAMS, &SPLIT_SHARE],
            entry: "main",
            bindings,
            params_size: size_of::<TrainAttentionParams>(),
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

/// How [`TrainAttention::backward_split_ops`] splits the backward's sums.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackwardSplits {
    /// Splits of each pair tile's keys in the dq pass.
    pub dq: usize,
    /// Splits of each key tile's pairs in the dk/dv pass.
    pub dkdv: usize,
}

impl BackwardSplits {
    /// No split: each pass writes its gradient directly.
    pub const NONE: BackwardSplits = BackwardSplits { dq: 1, dkdv: 1 };
}

/// The backward's views: the forward's inputs and outputs, the output's gradient, and
/// where the input gradients go.
#[derive(Debug, Clone, Copy)]
pub struct TrainAttentionBackward<'a> {
    /// The forward's q, `[n, n_head * dk]`.
    pub q: View<'a>,
    /// The forward's k, `[n, n_kv * dk]`.
    pub k: View<'a>,
    /// The forward's v, `[n, n_kv * dv]`.
    pub v: View<'a>,
    /// The forward's o, `[n, n_head * dv]`.
    pub o: View<'a>,
    /// The forward's log-sum-exp, `[n, n_head]`.
    pub lse: View<'a>,
    /// `dL/do`, `[n, n_head * dv]`.
    pub d_o: View<'a>,
    /// `[n]` u32, as the forward's.
    pub start: View<'a>,
    /// Receives `dL/dq`, `[n, n_head * dk]`.
    pub dq: View<'a>,
    /// Receives `dL/dk`, `[n, n_kv * dk]`.
    pub dk: View<'a>,
    /// Receives `dL/dv`, `[n, n_kv * dv]`.
    pub dv: View<'a>,
}

impl TrainAttention {
    /// The backward of [`TrainAttention::forward_op`]: two ops, dq's then dk's and dv's
    /// (independent: either order). The gradients must be other tensors than the inputs
    /// (wgpu forbids one buffer read and written in a dispatch); dk and dv may be views of
    /// one tensor, not overlapping. Each gradient is written, not added to.
    pub fn backward_ops(&self, b: TrainAttentionBackward<'_>) -> Result<Vec<Op>, GpuError> {
        self.backward_split_ops(b, None, BackwardSplits::NONE)
    }

    /// Elements of the scratch [`TrainAttention::backward_split_ops`] takes for `splits`.
    pub fn backward_scratch_len(&self, splits: BackwardSplits) -> usize {
        let dq = if splits.dq > 1 {
            splits.dq * self.n * self.n_head * self.dk
        } else {
            0
        };
        let dkdv = if splits.dkdv > 1 {
            splits.dkdv * self.n * self.n_kv * (self.dk + self.dv)
        } else {
            0
        };
        dq + dkdv
    }

    /// As [`TrainAttention::backward_ops`] with the sums split in their dispatches (the grid's
    /// z: more workgroups where a block has few tiles, and no tile that sees a whole sequence
    /// walked by one workgroup alone): dq's over each pair tile's keys, dk's and dv's over
    /// each key tile's pairs. Each split's partial sums go to their own slice of `scratch`
    /// ([`TrainAttention::backward_scratch_len`] elements, another tensor than the gradients:
    /// dq's slices, then dk's, then dv's), then [`SplitSum`] adds the slices into the
    /// gradient. One split (or no scratch) writes the gradient directly.
    pub fn backward_split_ops(
        &self,
        b: TrainAttentionBackward<'_>,
        scratch: Option<View<'_>>,
        splits: BackwardSplits,
    ) -> Result<Vec<Op>, GpuError> {
        self.backward_ops_with(false, b, scratch, splits)
    }

    /// [`TrainAttention::backward_split_ops`] on a device with `caps`: both passes on the
    /// tensor cores where [`TrainAttention::uses_tensor_cores`] says so (the same outputs, the
    /// same scratch and splits), else the f32 kernels.
    pub fn backward_ops_on(
        &self,
        caps: &Caps,
        tensor_cores: bool,
        b: TrainAttentionBackward<'_>,
        scratch: Option<View<'_>>,
        splits: BackwardSplits,
    ) -> Result<Vec<Op>, GpuError> {
        let coop = self.uses_tensor_cores(caps, tensor_cores);
        self.backward_ops_with(coop, b, scratch, splits)
    }

    /// As [`TrainAttention::backward_split_ops`] with the kernels named: `coop` runs the
    /// dq and dk/dv passes on the tensor-core kernels ([`crate::ops::attention_train_coop`]) on any
    /// device (on one without cooperative matrices, its emulated program: tests only), for
    /// the shapes [`TrainAttention::coop_fits`] accepts.
    pub(crate) fn backward_ops_with(
        &self,
        coop: bool,
        b: TrainAttentionBackward<'_>,
        scratch: Option<View<'_>>,
        splits: BackwardSplits,
    ) -> Result<Vec<Op>, GpuError> {
        const OP: &str = "attention_backward";
        self.validate(OP)?;
        if coop {
            self.check_coop(OP)?;
        }
        let n = self.n;
        let (q_len, k_len) = (n * self.n_head * self.dk, n * self.n_kv * self.dk);
        let (o_len, v_len) = (n * self.n_head * self.dv, n * self.n_kv * self.dv);
        b.q.check("attention_backward q", q_len)?;
        b.k.check("attention_backward k", k_len)?;
        b.v.check("attention_backward v", v_len)?;
        b.o.check("attention_backward o", o_len)?;
        b.lse.check("attention_backward lse", n * self.n_head)?;
        b.d_o.check("attention_backward do", o_len)?;
        b.start.check("attention_backward start", n)?;
        b.dq.check("attention_backward dq", q_len)?;
        b.dk.check("attention_backward dk", k_len)?;
        b.dv.check("attention_backward dv", v_len)?;
        let splits = match scratch {
            Some(_) => BackwardSplits {
                dq: splits.dq.clamp(1, self.dq_key_tiles()),
                dkdv: splits.dkdv.clamp(1, self.dkdv_pair_tiles()),
            },
            None => BackwardSplits::NONE,
        };
        // Where each pass writes: the gradient, or its slices in the scratch.
        let (mut dq_out, mut dk_out, mut dv_out) = (b.dq, b.dk, b.dv);
        if let Some(t) = scratch
            && splits != BackwardSplits::NONE
        {
            t.check(
                "attention_backward scratch",
                self.backward_scratch_len(splits),
            )?;
            let grads = [b.dq.t.buf.id(), b.dk.t.buf.id(), b.dv.t.buf.id()];
            if grads.contains(&t.t.buf.id()) {
                return Err(GpuError::InvalidParams {
                    op: OP,
                    detail: "the split scratch in a gradient's tensor".into(),
                });
            }
            let mut at = t.offset;
            if splits.dq > 1 {
                dq_out = View::at(t.t, at);
                at += splits.dq * q_len;
            }
            if splits.dkdv > 1 {
                dk_out = View::at(t.t, at);
                dv_out = View::at(t.t, at + splits.dkdv * k_len);
            }
        }
        let ends = [
            dq_out.offset + splits.dq * q_len,
            dk_out.offset + splits.dkdv * k_len,
            dv_out.offset + splits.dkdv * v_len,
        ];
        if let Some(&widest) = ends.iter().find(|&&e| e > u32::MAX as usize) {
            return Err(GpuError::InvalidParams {
                op: OP,
                detail: format!("{widest} elements past u32 indices"),
            });
        }
        let params = TrainAttentionParams {
            q_offset: b.q.offset as u32,
            k_offset: b.k.offset as u32,
            v_offset: b.v.offset as u32,
            o_offset: b.o.offset as u32,
            lse_offset: b.lse.offset as u32,
            do_offset: b.d_o.offset as u32,
            start_offset: b.start.offset as u32,
            dq_offset: dq_out.offset as u32,
            dk_offset: dk_out.offset as u32,
            dv_offset: dv_out.offset as u32,
            key_splits: splits.dq as u32,
            pair_splits: splits.dkdv as u32,
            ..self.params()
        };
        let inputs = [
            &b.q.t.buf,
            &b.k.t.buf,
            &b.v.t.buf,
            &b.o.t.buf,
            &b.lse.t.buf,
            &b.d_o.t.buf,
            &b.start.t.buf,
        ];
        let dq_buffers: Vec<_> = inputs.iter().copied().chain([&dq_out.t.buf]).collect();
        let dkdv_buffers: Vec<_> = inputs
            .iter()
            .copied()
            .chain([&dk_out.t.buf, &dv_out.t.buf])
            .collect();
        let mut ops = vec![
            match coop {
                true => self.coop_op(CoopPass::Dq, &params, &dq_buffers, splits.dq),
                false => Op::new(
                    AttentionBackwardKernel::Dq,
                    WORKGROUP,
                    &params,
                    &dq_buffers,
                    self.pair_grid(splits.dq),
                ),
            },
            match coop {
                true => self.coop_op(CoopPass::DkDv, &params, &dkdv_buffers, splits.dkdv),
                false => Op::new(
                    AttentionBackwardKernel::DkDv,
                    WORKGROUP,
                    &params,
                    &dkdv_buffers,
                    self.key_grid(splits.dkdv),
                ),
            },
        ];
        let sums = [
            (splits.dq, dq_out, b.dq, n * self.n_head, self.dk),
            (splits.dkdv, dk_out, b.dk, n * self.n_kv, self.dk),
            (splits.dkdv, dv_out, b.dv, n * self.n_kv, self.dv),
        ];
        for (slices, parts, out, n_rows, d) in sums {
            if slices > 1 {
                let sum = SplitSum {
                    n_rows,
                    n_cols: d,
                    slices,
                    out_stride: d,
                    accumulate: false,
                };
                ops.push(sum.op(parts, out)?);
            }
        }
        Ok(ops)
    }
}
