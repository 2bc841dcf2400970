//! The matmul's backward through its frozen weight: for `y = x W^T` ([`crate::ops::matmul`],
//! `W` stored as GGUF's `n_out` rows of `n_in`), `dx = dy W`, i.e. `dx[t, i] = sum_r dy[t, r]
//! W[r, i]`. The weight is read in its block format (any [`GpuFormat`]) and decoded in the
//! tile loader as the forward decodes it, so training never holds a dequantized copy.
//!
//! WGSL: `matmul/input_grad.wgsl` + `matmul/grad_tile.wgsl` (the f32 tile product it shares
//! with the weight gradient) + blocks + the format's decoder. A workgroup of 128 computes 64
//! inputs x 64 tokens, summing the weight's rows 32 at a time from workgroup memory. One
//! dispatch per weight chunk the rows touch: the sum runs over rows, so every chunk after
//! the first adds to what the one before stored.

use crate::error::GpuError;
use crate::format::GpuFormat;
use crate::kernel::KernelFamily;
use crate::op::Op;
use crate::ops::matmul::Strides;
use crate::shader::{BLOCKS, Program, ShaderFile, WEIGHT_KERNEL_BINDINGS, shader_file};
use crate::tensor::{View, WeightRows};

#[cfg(any(test, feature = "parity"))]
mod parity;
#[cfg(test)]
pub(crate) use parity::matmul_forward_f64;
#[cfg(any(test, feature = "parity"))]
pub use parity::{CHECK, matmul_input_grad_ref};

#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
struct InputGradParams {
    n_in: u32,
    n_rows: u32,
    row_bytes: u32,
    n_tokens: u32,
    row0: u32,
    dy_offset: u32,
    dy_stride: u32,
    dx_offset: u32,
    dx_stride: u32,
    accumulate: u32,
    _pad: [u32; 2],
}

static SHADER: ShaderFile = shader_file!("matmul/input_grad.wgsl");
/// The 64 x 64 f32 tile product both backward products share.
pub(crate) static GRAD_TILE: ShaderFile = shader_file!("matmul/grad_tile.wgsl");

/// Invocations per workgroup (8 x 16 over a 64 x 64 tile, `matmul/grad_tile.wgsl`).
pub(crate) const WORKGROUP: u32 = 128;
/// The side of a workgroup's output tile.
pub(crate) const TILE: usize = 64;

/// The input-gradient kernel over a weight of one format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MatmulInputGradKernel(pub GpuFormat);

impl KernelFamily for MatmulInputGradKernel {
    fn variants() -> Vec<MatmulInputGradKernel> {
        let formats = crate::shader::weight_formats().iter();
        formats.map(|&f| MatmulInputGradKernel(f)).collect()
    }

    fn program(self) -> Program {
        Program {
            name: format!("matmul_input_grad_{}", self.0.name()),
            files: [&SHADER, &GRAD_TILE, &BLOCKS]
                .into_iter()
                .chain(self.0.decoder().iter().copied())
                .collect(),
            entry: "main",
            bindings: WEIGHT_KERNEL_BINDINGS,
            params_size: size_of::<InputGradParams>(),
        }
    }

    #[cfg(any(test, feature = "parity"))]
    fn checks() -> Vec<crate::parity::Check> {
        vec![CHECK]
    }
}

/// `dx[dx.offset + t * x_stride + i] (+)= sum_r dy[dy.offset + t * y_stride + r] W[first + r,
/// i]` for `n_tokens` tokens, over rows `first..first + n` of a weight (all of them, or one
/// projection's range of a stacked q|k|v).
#[derive(Debug, Clone, Copy)]
pub struct MatmulInputGrad {
    /// Tokens (rows of dy and dx).
    pub n_tokens: usize,
    /// Their row strides: `x` for dx (the forward's input), `y` for dy (its output); `None`:
    /// packed (`n_in`, the rows taken).
    pub strides: Strides,
    /// Add to what dx holds (another product's gradient of the same input: q, k and v read
    /// one x) instead of overwriting it.
    pub accumulate: bool,
}

impl MatmulInputGrad {
    /// One op per weight chunk the rows touch (none for zero tokens). `dx` must be another
    /// tensor than `dy` (wgpu forbids one buffer read and written in a dispatch).
    pub fn ops(self, w: WeightRows<'_>, dy: View<'_>, dx: View<'_>) -> Result<Vec<Op>, GpuError> {
        const OP: &str = "matmul_input_grad";
        w.check(OP)?;
        let s = w.w.shape;
        let (dys, dxs) = (
            self.strides.y.unwrap_or(w.n),
            self.strides.x.unwrap_or(s.n_in),
        );
        if self.n_tokens > 1 && (dys < w.n || dxs < s.n_in) {
            return Err(GpuError::InvalidParams {
                op: OP,
                detail: format!(
                    "token strides dy {dys} / dx {dxs} shorter than rows of {} / {}",
                    w.n, s.n_in
                ),
            });
        }
        if dx.t.buf.id() == dy.t.buf.id() {
            return Err(GpuError::InvalidParams {
                op: OP,
                detail: "dx and dy in one tensor (read and written by one dispatch)".into(),
            });
        }
        if self.n_tokens == 0 {
            return Ok(Vec::new());
        }
        let last = self.n_tokens - 1;
        dy.check("matmul_input_grad dy", last * dys + w.n)?;
        dx.check("matmul_input_grad dx", last * dxs + s.n_in)?;
        let end = w.first + w.n;
        let grid = [
            s.n_in.div_ceil(TILE) as u32,
            self.n_tokens.div_ceil(TILE) as u32,
            1,
        ];
        let mut first_dispatch = true;
        let mut ops = Vec::new();
        for c in &w.w.chunks {
            let lo = w.first.max(c.first_row);
            let hi = end.min(c.first_row + c.n_rows);
            if lo >= hi {
                continue;
            }
            let params = InputGradParams {
                n_in: s.n_in as u32,
                n_rows: (hi - lo) as u32,
                row_bytes: s.format.row_bytes(s.n_in) as u32,
                n_tokens: self.n_tokens as u32,
                row0: (lo - c.first_row) as u32,
                dy_offset: (dy.offset + lo - w.first) as u32,
                dy_stride: dys as u32,
                dx_offset: dx.offset as u32,
                dx_stride: dxs as u32,
                accumulate: u32::from(self.accumulate || !first_dispatch),
                _pad: [0; 2],
            };
            first_dispatch = false;
            let kernel = MatmulInputGradKernel(s.format);
            let buffers = [&c.buf, &dy.t.buf, &dx.t.buf, &c.buf];
            ops.push(Op::new(kernel, WORKGROUP, &params, &buffers, grid));
        }
        Ok(ops)
    }
}
