//! The second half of a product split over its sum: the training gradients' products
//! (`dW = dYᵀ X` over many tokens, `dX = dY W` over a vocabulary of rows) have few output
//! tiles and a long sum, so one dispatch runs `slices` workgroups per tile, each summing its
//! share into a scratch slice of its own, and this op adds the slices up in split order onto
//! the output (or onto what it holds: gradient accumulation). Splitting in one dispatch (the
//! grid's z) and not as several dispatches matters: a barrier between dispatches makes each
//! wait for the last, so separate dispatches would not run side by side.
//!
//! WGSL: `matmul/split_sum.wgsl`, one invocation an output element.

use crate::error::GpuError;
use crate::kernel::KernelFamily;
use crate::op::{Op, grid_1d};
use crate::pipeline::PipelineKey;
use crate::shader::{BindingKind, Program, ShaderFile, shader_file};
use crate::tensor::View;

#[cfg(any(test, feature = "parity"))]
mod parity;
#[cfg(any(test, feature = "parity"))]
pub use parity::{CHECK, split_sum_ref};

#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
struct SplitSumParams {
    n_rows: u32,
    n_cols: u32,
    slices: u32,
    slice: u32,
    src_offset: u32,
    out_offset: u32,
    out_stride: u32,
    accumulate: u32,
}

static SHADER: ShaderFile = shader_file!("matmul/split_sum.wgsl");

const BINDINGS: &[BindingKind] = &[
    BindingKind::Uniform,
    BindingKind::StorageRead,
    BindingKind::StorageReadWrite,
];

const WORKGROUP: u32 = 256;

/// The split sum's kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SplitSumKernel;

impl KernelFamily for SplitSumKernel {
    fn variants() -> Vec<SplitSumKernel> {
        vec![SplitSumKernel]
    }

    fn program(self) -> Program {
        Program {
            name: "split_sum".into(),
            files: vec![&SHADER],
            entry: "main",
            bindings: BINDINGS,
            params_size: size_of::<SplitSumParams>(),
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

/// `slices` partial results of `n_rows x n_cols` (row-major, `n_cols` a row), one after
/// another in `src`, added up into `out` (rows `out_stride` apart).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SplitSum {
    /// Rows of the output.
    pub n_rows: usize,
    /// Values a row.
    pub n_cols: usize,
    /// Partial results.
    pub slices: usize,
    /// Elements from one output row to the next (`n_cols` for a packed output).
    pub out_stride: usize,
    /// Add onto what `out` holds instead of overwriting it.
    pub accumulate: bool,
}

impl SplitSum {
    /// Elements of one slice.
    pub fn slice_len(&self) -> usize {
        self.n_rows * self.n_cols
    }

    /// The op: `src` holds the slices from its offset, `out` the output from its own; they
    /// must be two tensors (wgpu forbids one buffer read and written in a dispatch).
    pub fn op(&self, src: View<'_>, out: View<'_>) -> Result<Op, GpuError> {
        const OP: &str = "split_sum";
        if src.t.buf.id() == out.t.buf.id() {
            return Err(GpuError::InvalidParams {
                op: OP,
                detail: "the slices and the output in one tensor".into(),
            });
        }
        if self.n_rows > 1 && self.out_stride < self.n_cols {
            return Err(GpuError::InvalidParams {
                op: OP,
                detail: format!(
                    "row stride {} under {} values",
                    self.out_stride, self.n_cols
                ),
            });
        }
        let len = self.slice_len();
        src.check("split_sum src", self.slices * len)?;
        if len > 0 {
            out.check(
                "split_sum out",
                (self.n_rows - 1) * self.out_stride + self.n_cols,
            )?;
        }
        let index = |v: usize| {
            u32::try_from(v).map_err(|_| GpuError::InvalidParams {
                op: OP,
                detail: format!("{v} past the kernel's 32-bit indices"),
            })
        };
        index(src.offset + self.slices * len)?;
        index(out.offset + self.n_rows * self.out_stride)?;
        let params = SplitSumParams {
            n_rows: self.n_rows as u32,
            n_cols: self.n_cols as u32,
            slices: self.slices as u32,
            slice: len as u32,
            src_offset: src.offset as u32,
            out_offset: out.offset as u32,
            out_stride: self.out_stride as u32,
            accumulate: u32::from(self.accumulate),
        };
        let buffers = [&src.t.buf, &out.t.buf];
        let grid = grid_1d(len.div_ceil(WORKGROUP as usize));
        Ok(Op::new(SplitSumKernel, WORKGROUP, &params, &buffers, grid))
    }
}
