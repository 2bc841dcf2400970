//! The weight gradient of a trainable f32 matrix (LoRA's A and B): for `y = x W^T` with `W`
//! `n_out` rows of `n_in`, `dW += dy^T x`, i.e. `dW[o, i] += sum_t dy[t, o] x[t, i]`, one
//! product over a whole sequence of tokens (not a rank-1 update a token), added to what dW
//! holds so micro-batches accumulate.
//!
//! WGSL: `matmul/weight_grad_params.wgsl` with one of two kernels, chosen by the shape:
//! - [`MatmulWeightGradKernel::Tiles`], `matmul/weight_grad.wgsl` + `matmul/grad_tile.wgsl`
//!   (the f32 tile product it shares with the input gradient): a workgroup of 128 computes 64
//!   rows x 64 inputs of dW, summing the tokens 32 at a time from workgroup memory;
//! - where a side of dW is at most [`THIN`] wide (a LoRA rank: A's rows, B's inputs),
//!   [`MatmulWeightGradKernel::ThinRows`] / [`MatmulWeightGradKernel::ThinInputs`],
//!   `matmul/weight_grad_thin.wgsl`: a workgroup of 256 takes 32 columns of the wide side
//!   with all of the thin one, so that the product reads its wide input once, as its
//!   bytes bound it, instead of computing 64-wide tiles three quarters empty.

use crate::error::GpuError;
use crate::kernel::KernelFamily;
use crate::op::Op;
use crate::ops::matmul::{ACC8, Strides};
use crate::ops::matmul_input_grad::{GRAD_TILE, TILE, WORKGROUP};
use crate::ops::split_sum::SplitSum;
use crate::pipeline::PipelineKey;
use crate::shader::{BindingKind, Program, ShaderFile, shader_file};
use crate::tensor::View;

#[cfg(any(test, feature = "parity"))]
mod parity;
#[cfg(any(test, feature = "parity"))]
pub use parity::{CHECK, weight_grad_ref};

#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
struct WeightGradParams {
    n_tokens: u32,
    n_in: u32,
    n_out: u32,
    dy_offset: u32,
    dy_stride: u32,
    x_offset: u32,
    x_stride: u32,
    dw_offset: u32,
    accumulate: u32,
    tokens_per_split: u32,
    split_stride: u32,
    _pad: u32,
}

static PARAMS: ShaderFile = shader_file!("matmul/weight_grad_params.wgsl");
static SHADER: ShaderFile = shader_file!("matmul/weight_grad.wgsl");
static THIN_SHADER: ShaderFile = shader_file!("matmul/weight_grad_thin.wgsl");

/// The widest side of dW the thin kernels take (`R` in `matmul/weight_grad_thin.wgsl`).
pub const THIN: usize = 16;
/// Wide-side columns a thin kernel's workgroup takes (`COLS`), and its size.
const THIN_COLS: usize = 32;
const THIN_WORKGROUP: u32 = 256;

const BINDINGS: &[BindingKind] = &[
    BindingKind::Uniform,
    BindingKind::StorageRead,
    BindingKind::StorageRead,
    BindingKind::StorageReadWrite,
];

/// The weight-gradient kernels (f32 only: the trainable matrices are f32 master weights).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MatmulWeightGradKernel {
    /// 64 x 64 tiles of dW, any shape.
    Tiles,
    /// dW of at most [`THIN`] rows (LoRA's A): 32 inputs a workgroup, every row.
    ThinRows,
    /// dW of at most [`THIN`] inputs (LoRA's B): 32 rows a workgroup, every input.
    ThinInputs,
}

impl MatmulWeightGradKernel {
    /// The kernel for a dW of `n_out` rows of `n_in`.
    fn for_shape(n_out: usize, n_in: usize) -> MatmulWeightGradKernel {
        if n_out <= THIN {
            MatmulWeightGradKernel::ThinRows
        } else if n_in <= THIN {
            MatmulWeightGradKernel::ThinInputs
        } else {
            MatmulWeightGradKernel::Tiles
        }
    }

    /// Invocations per workgroup.
    fn workgroup(self) -> u32 {
        match self {
            MatmulWeightGradKernel::Tiles => WORKGROUP,
            MatmulWeightGradKernel::ThinRows | MatmulWeightGradKernel::ThinInputs => THIN_WORKGROUP,
        }
    }

    /// Workgroup size and grid (x, y) of one split of a dW of `n_out` rows of `n_in`.
    fn layout(self, n_out: usize, n_in: usize) -> (u32, [u32; 2]) {
        let grid = match self {
            MatmulWeightGradKernel::Tiles => {
                [n_out.div_ceil(TILE) as u32, n_in.div_ceil(TILE) as u32]
            }
            MatmulWeightGradKernel::ThinRows => [n_in.div_ceil(THIN_COLS) as u32, 1],
            MatmulWeightGradKernel::ThinInputs => [n_out.div_ceil(THIN_COLS) as u32, 1],
        };
        (self.workgroup(), grid)
    }
}

impl KernelFamily for MatmulWeightGradKernel {
    fn variants() -> Vec<MatmulWeightGradKernel> {
        vec![
            MatmulWeightGradKernel::Tiles,
            MatmulWeightGradKernel::ThinRows,
            MatmulWeightGradKernel::ThinInputs,
        ]
    }

    fn program(self) -> Program {
        let (name, files, entry): (&str, Vec<&'static ShaderFile>, _) = match self {
            MatmulWeightGradKernel::Tiles => (
                "matmul_weight_grad",
                vec![&PARAMS, &SHADER, &GRAD_TILE, &ACC8],
                "main",
            ),
            MatmulWeightGradKernel::ThinRows => (
                "matmul_weight_grad_thin_rows",
                vec![&PARAMS, &THIN_SHADER],
                "thin_rows",
            ),
            MatmulWeightGradKernel::ThinInputs => (
                "matmul_weight_grad_thin_inputs",
                vec![&PARAMS, &THIN_SHADER],
                "thin_inputs",
            ),
        };
        Program {
            name: name.into(),
            files,
            entry,
            bindings: BINDINGS,
            params_size: size_of::<WeightGradParams>(),
        }
    }

    fn pipeline_keys(self) -> Vec<PipelineKey> {
        vec![PipelineKey::new(self, self.workgroup())]
    }

    #[cfg(any(test, feature = "parity"))]
    fn checks() -> Vec<crate::parity::Check> {
        vec![CHECK]
    }
}

/// `dw[dw.offset + o * n_in + i] (+)= sum_t dy[dy.offset + t * y_stride + o] x[x.offset + t *
/// x_stride + i]` over `n_tokens` tokens: the gradient of an f32 weight of `n_out` rows of
/// `n_in` (GGUF's layout) from its product's input x and output gradient dy.
#[derive(Debug, Clone, Copy)]
pub struct MatmulWeightGrad {
    /// Tokens summed over (rows of dy and x).
    pub n_tokens: usize,
    /// The weight's inputs (columns of dW).
    pub n_in: usize,
    /// The weight's rows (rows of dW).
    pub n_out: usize,
    /// Token strides: `x` for x, `y` for dy; `None`: packed (`n_in`, `n_out`).
    pub strides: Strides,
    /// Add to what dW holds (gradient accumulation) instead of overwriting it.
    pub accumulate: bool,
}

impl MatmulWeightGrad {
    /// The op. `dw` must be another tensor than `dy` and `x` (wgpu forbids one buffer read
    /// and written in a dispatch). Zero tokens with `accumulate` leave dW as it is (no op);
    /// without it, dW is zeroed.
    pub fn ops(self, dy: View<'_>, x: View<'_>, dw: View<'_>) -> Result<Vec<Op>, GpuError> {
        self.dispatch(dy, x, dw, 1, self.n_out * self.n_in)
    }

    /// The dispatch, its tokens split `splits` ways (the grid's z): split z writes (or adds)
    /// its dW `z × stride` elements after dw's offset. One split is the whole product.
    fn dispatch(
        self,
        dy: View<'_>,
        x: View<'_>,
        dw: View<'_>,
        splits: usize,
        stride: usize,
    ) -> Result<Vec<Op>, GpuError> {
        const OP: &str = "matmul_weight_grad";
        let (dys, xs) = (
            self.strides.y.unwrap_or(self.n_out),
            self.strides.x.unwrap_or(self.n_in),
        );
        if self.n_in == 0 || self.n_out == 0 {
            return Err(GpuError::InvalidParams {
                op: OP,
                detail: format!("a weight of {} x {}", self.n_out, self.n_in),
            });
        }
        if self.n_tokens > 1 && (dys < self.n_out || xs < self.n_in) {
            return Err(GpuError::InvalidParams {
                op: OP,
                detail: format!(
                    "token strides dy {dys} / x {xs} shorter than rows of {} / {}",
                    self.n_out, self.n_in
                ),
            });
        }
        let out = dw.t.buf.id();
        if out == dy.t.buf.id() || out == x.t.buf.id() {
            return Err(GpuError::InvalidParams {
                op: OP,
                detail: "dw in the tensor of dy or x (read and written by one dispatch)".into(),
            });
        }
        let len = self.n_out * self.n_in;
        let (per, parts) = split_tokens(self.n_tokens, splits);
        if parts > 1 && stride < len {
            return Err(GpuError::InvalidParams {
                op: OP,
                detail: format!("split stride {stride} under a dW of {len}"),
            });
        }
        dw.check("matmul_weight_grad dw", (parts - 1) * stride + len)?;
        if self.n_tokens == 0 && self.accumulate {
            return Ok(Vec::new());
        }
        if self.n_tokens > 0 {
            let last = self.n_tokens - 1;
            dy.check("matmul_weight_grad dy", last * dys + self.n_out)?;
            x.check("matmul_weight_grad x", last * xs + self.n_in)?;
        }
        let params = WeightGradParams {
            n_tokens: self.n_tokens as u32,
            n_in: self.n_in as u32,
            n_out: self.n_out as u32,
            dy_offset: dy.offset as u32,
            dy_stride: dys as u32,
            x_offset: x.offset as u32,
            x_stride: xs as u32,
            dw_offset: dw.offset as u32,
            accumulate: u32::from(self.accumulate),
            tokens_per_split: per as u32,
            split_stride: if parts > 1 { stride as u32 } else { 0 },
            _pad: 0,
        };
        let kernel = MatmulWeightGradKernel::for_shape(self.n_out, self.n_in);
        let (size, [gx, gy]) = kernel.layout(self.n_out, self.n_in);
        let buffers = [&dy.t.buf, &x.t.buf, &dw.t.buf];
        Ok(vec![Op::new(
            kernel,
            size,
            &params,
            &buffers,
            [gx, gy, parts as u32],
        )])
    }

    /// Workgroups of one split of the product (the plan splits the tokens until the splits
    /// together fill the device).
    pub fn workgroups(&self) -> usize {
        let kernel = MatmulWeightGradKernel::for_shape(self.n_out, self.n_in);
        let (_, [gx, gy]) = kernel.layout(self.n_out, self.n_in);
        gx as usize * gy as usize
    }

    /// As [`MatmulWeightGrad::ops`] with the tokens split `splits` ways in one dispatch
    /// (the grid's z: more workgroups for a long sum over few output tiles), each split's
    /// partial dW into its own slice of `scratch` (`splits × n_out × n_in` elements, another
    /// tensor than dy, x and dW), then [`SplitSum`] adding the slices onto dW (or over it,
    /// without `accumulate`). One split is [`MatmulWeightGrad::ops`].
    pub fn split_ops(
        self,
        dy: View<'_>,
        x: View<'_>,
        scratch: View<'_>,
        splits: usize,
        dw: View<'_>,
    ) -> Result<Vec<Op>, GpuError> {
        let splits = splits.clamp(1, self.n_tokens.max(1));
        if splits == 1 {
            return self.ops(dy, x, dw);
        }
        if scratch.t.buf.id() == dw.t.buf.id() {
            return Err(GpuError::InvalidParams {
                op: "matmul_weight_grad",
                detail: "the split scratch in dW's tensor".into(),
            });
        }
        let (mut ops, slices) = self.partial_ops(dy, x, scratch, splits, self.n_out * self.n_in)?;
        let sum = SplitSum {
            n_rows: self.n_out,
            n_cols: self.n_in,
            slices,
            out_stride: self.n_in,
            accumulate: self.accumulate,
        };
        ops.push(sum.op(scratch, dw)?);
        Ok(ops)
    }

    /// The first half of [`MatmulWeightGrad::split_ops`] alone: the tokens split `splits` ways,
    /// split z's partial dW (written, not added) at `z × stride` after scratch's offset
    /// (`stride` at least `n_out × n_in`); returns the op and the number of slices. For a
    /// caller whose one [`SplitSum`] adds up several weights' partials: two weights whose
    /// gradients lie one after the other (a LoRA pair's A and B) and whose tokens split alike
    /// write their partials side by side in slices of both, and one sum over both gives each
    /// element the same additions in the same order as two would.
    pub fn partial_ops(
        self,
        dy: View<'_>,
        x: View<'_>,
        scratch: View<'_>,
        splits: usize,
        stride: usize,
    ) -> Result<(Vec<Op>, usize), GpuError> {
        let partial = MatmulWeightGrad {
            accumulate: false,
            ..self
        };
        let ops = partial.dispatch(dy, x, scratch, splits, stride)?;
        Ok((ops, self.slices(splits)))
    }

    /// The slices [`MatmulWeightGrad::partial_ops`] writes for `splits` splits.
    pub fn slices(self, splits: usize) -> usize {
        split_tokens(self.n_tokens, splits.clamp(1, self.n_tokens.max(1))).1
    }
}

/// `n` tokens in at most `splits` splits: the tokens a split sums and how many splits that
/// makes (one, for no tokens).
fn split_tokens(n: usize, splits: usize) -> (usize, usize) {
    let per = n.div_ceil(splits.max(1)).max(1);
    (per, n.div_ceil(per).max(1))
}
