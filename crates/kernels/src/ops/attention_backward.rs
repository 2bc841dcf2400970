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

use crate::error::GpuError;
use crate::kernel::KernelFamily;
use crate::op::Op;
use crate::ops::attention_train::{PARAMS, TILES, TrainAttention, TrainAttentionParams, WORKGROUP};
use crate::ops::split_sum::SplitSum;
use crate::shader::{BindingKind, Program, ShaderFile, shader_file};
use crate::tensor::View;

#[cfg(any(test, feature = "parity"))]
mod parity;
#[cfg(any(test, feature = "parity"))]
pub use parity::{CHECK, attention_backward_ref};

static DQ: ShaderFile = shader_file!("attention/train_backward_dq.wgsl");
static DKDV: ShaderFile = shader_file!("attention/train_backward_dkdv.wgsl");
static BACKWARD_TILES: ShaderFile = shader_file!("attention/train_backward_tiles.wgsl");

/// q, k, v, o, lse, do, start read; dq written.
const BINDINGS_DQ: &[BindingKind] = &[
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
const BINDINGS_DKDV: &[BindingKind] = &[
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
            files: vec![file, &BACKWARD_TILES, &TILES, &PARAMS],
            entry: "main",
            bindings,
            params_size: size_of::<TrainAttentionParams>(),
        }
    }

    #[cfg(any(test, feature = "parity"))]
    fn checks() -> Vec<crate::parity::Check> {
        vec![CHECK]
    }
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
        self.backward_split_ops(b, None, 1)
    }

    /// Elements of the scratch [`TrainAttention::backward_split_ops`] takes for `splits`.
    pub fn dkdv_scratch_len(&self, splits: usize) -> usize {
        splits * self.n * self.n_kv * (self.dk + self.dv)
    }

    /// As [`TrainAttention::backward_ops`] with each key tile's pairs split `splits` ways in
    /// the dk/dv dispatch (the grid's z: more workgroups where a block has few key tiles,
    /// and the first key tile of a sequence, which every later row sees, no longer walks
    /// them all alone): each split's partial dk and dv into its own slice of `scratch`
    /// ([`TrainAttention::dkdv_scratch_len`] elements, another tensor than the gradients),
    /// then [`SplitSum`] adding the slices into dk and into dv. One split (or no scratch)
    /// writes dk and dv directly.
    pub fn backward_split_ops(
        &self,
        b: TrainAttentionBackward<'_>,
        scratch: Option<View<'_>>,
        splits: usize,
    ) -> Result<Vec<Op>, GpuError> {
        const OP: &str = "attention_backward";
        self.validate(OP)?;
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
            Some(_) => splits.clamp(1, self.dkdv_pair_tiles()),
            None => 1,
        };
        // Split, dk's partials and dv's sit in the scratch from these elements.
        let (dk_out, dv_out) = match scratch {
            Some(t) if splits > 1 => {
                t.check("attention_backward scratch", self.dkdv_scratch_len(splits))?;
                if [b.dk.t.buf.id(), b.dv.t.buf.id()].contains(&t.t.buf.id()) {
                    return Err(GpuError::InvalidParams {
                        op: OP,
                        detail: "the split scratch in dk's or dv's tensor".into(),
                    });
                }
                (t, View::at(t.t, t.offset + splits * k_len))
            }
            _ => (b.dk, b.dv),
        };
        let widest = (dk_out.offset + splits * k_len).max(dv_out.offset + splits * v_len);
        if widest > u32::MAX as usize {
            return Err(GpuError::InvalidParams {
                op: OP,
                detail: format!("{widest} scratch elements past u32 indices"),
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
            dq_offset: b.dq.offset as u32,
            dk_offset: dk_out.offset as u32,
            dv_offset: dv_out.offset as u32,
            splits: splits as u32,
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
        let dq_buffers: Vec<_> = inputs.iter().copied().chain([&b.dq.t.buf]).collect();
        let dkdv_buffers: Vec<_> = inputs
            .iter()
            .copied()
            .chain([&dk_out.t.buf, &dv_out.t.buf])
            .collect();
        let mut ops = vec![
            Op::new(
                AttentionBackwardKernel::Dq,
                WORKGROUP,
                &params,
                &dq_buffers,
                self.pair_grid(),
            ),
            Op::new(
                AttentionBackwardKernel::DkDv,
                WORKGROUP,
                &params,
                &dkdv_buffers,
                self.key_grid(splits),
            ),
        ];
        if splits > 1 {
            for (parts, out, d) in [(dk_out, b.dk, self.dk), (dv_out, b.dv, self.dv)] {
                let sum = SplitSum {
                    n_rows: n * self.n_kv,
                    n_cols: d,
                    slices: splits,
                    out_stride: d,
                    accumulate: false,
                };
                ops.push(sum.op(parts, out)?);
            }
        }
        Ok(ops)
    }
}
