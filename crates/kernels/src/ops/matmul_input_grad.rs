//! The matmul's backward through its frozen weight: for `y = x W^T` ([`crate::ops::matmul`],
//! `W` stored as GGUF's `n_out` rows of `n_in`), `dx = dy W`, i.e. `dx[t, i] = sum_r dy[t, r]
//! W[r, i]`. The weight is read in its block format (any [`GpuFormat`]) and decoded in the
//! tile loader as the forward decodes it, so training never holds a dequantized copy.
//!
//! Two kernels with one contract (`matmul/input_grad_params.wgsl`), picked by
//! [`MatmulInputGrad::tensor_cores`] and the device:
//! - `matmul/input_grad.wgsl` + `matmul/grad_tile.wgsl` (the f32 tile product it shares with
//!   the weight gradient), every device: a workgroup of 128 computes 64 inputs x 64 tokens in
//!   f32, summing the weight's rows 32 at a time from workgroup memory.
//! - `matmul/input_grad_coop.wgsl` (devices with [`Caps::coop_f16`]): the same tile or a
//!   larger one ([`InputGradTile`], [`MatmulInputGrad::tile`]), the weight's rows 64 at a time,
//!   staged as f16 (the weights as decoded, a row's inputs consecutive, read by the tensor
//!   cores as a column-major A) and multiplied on the tensor cores with f32 accumulation. f16
//!   holds dY only within about 6e-5 .. 65504 at full precision: a caller whose gradients are
//!   smaller scales its loss (as mixed-precision training does), or keeps the f32 kernel.
//!
//! Both read the weight through the format's decoder, as the forward does. One dispatch per
//! weight chunk the rows touch: the sum runs over rows, so every chunk after the first adds
//! to what the one before stored.
//!
//! The tensor-core kernel's bound, per element (n rows summed, k dispatches, d0 what dX held
//! when accumulating, else 0): matmul_coop's (its module doc) for the products and their sum,
//! `sum_r (|w| e_dy + |dy| e_w + e_w e_dy) + 4 n u S'` with `S' = sum_r (|w| + e_w)(|dy| +
//! e_dy)`, plus one f32 addition onto dX a dispatch, `k u (S' + |d0|)`: in all
//! `sum_r (|w| e_dy + |dy| e_w + e_w e_dy) + (4n + k) u (S' + |d0|)`.

use crate::device::Caps;
use crate::error::GpuError;
use crate::format::GpuFormat;
use crate::kernel::KernelFamily;
use crate::op::Op;
use crate::ops::matmul::{ACC8, Strides};
use crate::ops::split_sum::SplitSum;
use crate::pipeline::PipelineKey;
use crate::shader::{
    BLOCKS, COOP_EMUL, COOP_OPS, Program, ShaderFile, WEIGHT_KERNEL_BINDINGS, shader_file,
};
use crate::tensor::{View, WeightRows};

#[cfg(any(test, feature = "parity"))]
mod parity;
mod tile;
#[cfg(test)]
pub(crate) use parity::matmul_forward_f64;
#[cfg(any(test, feature = "parity"))]
pub use parity::{CHECK, COOP_CHECK, matmul_input_grad_ref};
pub use tile::InputGradTile;

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
    rows_per_split: u32,
    split_stride: u32,
}

static SHADER: ShaderFile = shader_file!("matmul/input_grad.wgsl");
/// `Params`, the bindings and the weight's staging, shared by both kernels.
static PARAMS: ShaderFile = shader_file!("matmul/input_grad_params.wgsl");
static COOP_BODY: ShaderFile = shader_file!("matmul/input_grad_coop.wgsl");
/// The forward's coop loads and stores (the tiles and bindings carry the same names).
static COOP_IO: ShaderFile = shader_file!("matmul/coop_io.wgsl");
static COOP_IO_EMULATED: ShaderFile = shader_file!("matmul/coop_io_emul.wgsl");
/// The 64 x 64 f32 tile product both backward products share.
pub(crate) static GRAD_TILE: ShaderFile = shader_file!("matmul/grad_tile.wgsl");

/// Invocations per workgroup of the f32 kernels (8 x 16 over a 64 x 64 tile,
/// `matmul/grad_tile.wgsl`).
pub(crate) const WORKGROUP: u32 = 128;
/// The side of the f32 kernels' output tile.
pub(crate) const TILE: usize = 64;

/// The input-gradient kernel over a weight of one format: the f32 one, or the tensor-core one
/// with one of its tiles.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MatmulInputGradKernel {
    /// The weight's format.
    pub format: GpuFormat,
    /// The tensor-core kernel (`matmul/input_grad_coop.wgsl`).
    pub tensor_cores: bool,
    /// The tensor-core kernel's tile; the f32 kernel's is always [`InputGradTile::Small`].
    pub tile: InputGradTile,
}

impl MatmulInputGradKernel {
    /// The kernel's program; for the tensor-core kernel with `emulated`, its body over
    /// emulated coop ops (needs only SHADER_F16; what a device without cooperative matrices
    /// builds, for tests).
    fn program_with(self, emulated: bool) -> Program {
        let tile = self.tile.name();
        let (name, own): (String, &[&'static ShaderFile]) = match (self.tensor_cores, emulated) {
            (false, _) => ("matmul_input_grad".into(), &[&SHADER, &GRAD_TILE, &ACC8]),
            (true, false) => (
                format!("matmul_input_grad_coop_{tile}"),
                &[&COOP_OPS, &COOP_IO, &COOP_BODY],
            ),
            (true, true) => (
                format!("matmul_input_grad_coop_emulated_{tile}"),
                &[&COOP_EMUL, &COOP_IO_EMULATED, &COOP_BODY],
            ),
        };
        Program {
            name: format!("{name}_{}", self.format.name()),
            files: own
                .iter()
                .copied()
                .chain([&PARAMS, &BLOCKS])
                .chain(self.format.decoder().iter().copied())
                .collect(),
            entry: "main",
            bindings: WEIGHT_KERNEL_BINDINGS,
            params_size: size_of::<InputGradParams>(),
        }
    }
}

impl KernelFamily for MatmulInputGradKernel {
    fn variants() -> Vec<MatmulInputGradKernel> {
        let formats = crate::shader::weight_formats().iter();
        formats
            .flat_map(|&format| {
                let f32 = MatmulInputGradKernel {
                    format,
                    tensor_cores: false,
                    tile: InputGradTile::Small,
                };
                let coop = InputGradTile::ALL.map(|tile| MatmulInputGradKernel {
                    format,
                    tensor_cores: true,
                    tile,
                });
                std::iter::once(f32).chain(coop)
            })
            .collect()
    }

    fn program(self) -> Program {
        self.program_with(false)
    }

    fn programs(self) -> Vec<Program> {
        match self.tensor_cores {
            true => vec![self.program_with(false), self.program_with(true)],
            false => vec![self.program_with(false)],
        }
    }

    // The tensor-core kernel is picked only with coop_f16; tests build it elsewhere to run
    // its body over emulated coop ops.
    fn program_for(self, caps: &Caps) -> Program {
        self.program_with(self.tensor_cores && !caps.coop_f16)
    }

    fn constants(self) -> Vec<(&'static str, f64)> {
        match self.tensor_cores {
            true => self.tile.constants(),
            false => Vec::new(),
        }
    }

    fn pipeline_keys(self) -> Vec<PipelineKey> {
        vec![PipelineKey::new(self, self.tile.workgroup())]
    }

    #[cfg(any(test, feature = "parity"))]
    fn checks() -> Vec<crate::parity::Check> {
        vec![CHECK, COOP_CHECK]
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
    /// Run on the tensor cores where the device has them ([`Caps::coop_f16`]): the weight and
    /// dy rounded to f16, f32 accumulation (see the module doc for dy's range). `false`
    /// keeps the f32 kernel everywhere.
    pub tensor_cores: bool,
    /// The tensor-core kernel's tile (the f32 kernel's is always [`InputGradTile::Small`]).
    pub tile: InputGradTile,
}

impl MatmulInputGrad {
    /// One op per weight chunk the rows touch (none for zero tokens), on a device with
    /// `caps`. `dx` must be another tensor than `dy` (wgpu forbids one buffer read and
    /// written in a dispatch).
    pub fn ops(
        self,
        caps: &Caps,
        w: WeightRows<'_>,
        dy: View<'_>,
        dx: View<'_>,
    ) -> Result<Vec<Op>, GpuError> {
        self.ops_with(self.tensor_cores && caps.coop_f16, w, dy, dx)
    }

    /// As [`MatmulInputGrad::ops`] with the weight's rows split `splits` ways in one dispatch
    /// per chunk (the grid's z: more workgroups for a long sum over few output tiles, the LM
    /// head's vocabulary), each split's partial dX (`n_tokens × n_in`, packed) into its own
    /// slice of `scratch` (`splits × chunks` slices; another tensor than dy and dX), then
    /// [`SplitSum`] adding the slices onto dX (or over it, without `accumulate`). One split is
    /// [`MatmulInputGrad::ops`].
    pub fn split_ops(
        self,
        caps: &Caps,
        w: WeightRows<'_>,
        dy: View<'_>,
        scratch: View<'_>,
        splits: usize,
        dx: View<'_>,
    ) -> Result<Vec<Op>, GpuError> {
        self.split_ops_with(
            self.tensor_cores && caps.coop_f16,
            w,
            dy,
            scratch,
            splits,
            dx,
        )
    }

    /// As [`MatmulInputGrad::split_ops`] with the kernel named (see
    /// [`MatmulInputGrad::ops_with`]).
    pub(crate) fn split_ops_with(
        self,
        tensor_cores: bool,
        w: WeightRows<'_>,
        dy: View<'_>,
        scratch: View<'_>,
        splits: usize,
        dx: View<'_>,
    ) -> Result<Vec<Op>, GpuError> {
        if splits <= 1 || self.n_tokens == 0 {
            return self.ops_with(tensor_cores, w, dy, dx);
        }
        let n_in = w.w.shape.n_in;
        if scratch.t.buf.id() == dx.t.buf.id() {
            return Err(GpuError::InvalidParams {
                op: "matmul_input_grad",
                detail: "the split scratch in dX's tensor".into(),
            });
        }
        let partial = MatmulInputGrad {
            accumulate: false,
            strides: Strides {
                x: Some(n_in),
                y: self.strides.y,
            },
            ..self
        };
        let (mut ops, slices) = partial.dispatches(tensor_cores, w, dy, scratch, splits)?;
        let sum = SplitSum {
            n_rows: self.n_tokens,
            n_cols: n_in,
            slices,
            out_stride: self.strides.x.unwrap_or(n_in),
            accumulate: self.accumulate,
        };
        ops.push(sum.op(scratch, dx)?);
        Ok(ops)
    }

    /// As [`MatmulInputGrad::ops`] with the kernel named: `tensor_cores` runs the tensor-core
    /// kernel on any device (on one without cooperative matrices, its emulated program: tests
    /// only).
    pub(crate) fn ops_with(
        self,
        tensor_cores: bool,
        w: WeightRows<'_>,
        dy: View<'_>,
        dx: View<'_>,
    ) -> Result<Vec<Op>, GpuError> {
        Ok(self.dispatches(tensor_cores, w, dy, dx, 1)?.0)
    }

    /// One dispatch per weight chunk the rows touch, each chunk's rows split `splits` ways
    /// (the grid's z). Unsplit, the first dispatch writes dX (or adds to it, `accumulate`)
    /// and the later ones add. Split, every split writes its own partial dX (`n_tokens ×
    /// n_in`, rows `strides.x` apart) into the next slice from dx's offset; the slices'
    /// count comes back with the ops.
    fn dispatches(
        self,
        tensor_cores: bool,
        w: WeightRows<'_>,
        dy: View<'_>,
        dx: View<'_>,
        splits: usize,
    ) -> Result<(Vec<Op>, usize), GpuError> {
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
            return Ok((Vec::new(), 0));
        }
        let last = self.n_tokens - 1;
        dy.check("matmul_input_grad dy", last * dys + w.n)?;
        dx.check("matmul_input_grad dx", last * dxs + s.n_in)?;
        let end = w.first + w.n;
        let tile = match tensor_cores {
            true => self.tile,
            false => InputGradTile::Small,
        };
        let grid = [
            s.n_in.div_ceil(tile.inputs()) as u32,
            self.n_tokens.div_ceil(tile.tokens()) as u32,
            1,
        ];
        let split = splits > 1;
        let slice = self.n_tokens * dxs;
        let mut first_dispatch = true;
        let mut ops = Vec::new();
        let mut slices = 0;
        for c in &w.w.chunks {
            let lo = w.first.max(c.first_row);
            let hi = end.min(c.first_row + c.n_rows);
            if lo >= hi {
                continue;
            }
            let per = (hi - lo).div_ceil(splits.max(1));
            let parts = (hi - lo).div_ceil(per);
            let params = InputGradParams {
                n_in: s.n_in as u32,
                n_rows: (hi - lo) as u32,
                row_bytes: s.format.row_bytes(s.n_in) as u32,
                n_tokens: self.n_tokens as u32,
                row0: (lo - c.first_row) as u32,
                dy_offset: (dy.offset + lo - w.first) as u32,
                dy_stride: dys as u32,
                dx_offset: (dx.offset + slices * slice) as u32,
                dx_stride: dxs as u32,
                accumulate: u32::from(!split && (self.accumulate || !first_dispatch)),
                rows_per_split: per as u32,
                split_stride: if split { slice as u32 } else { 0 },
            };
            first_dispatch = false;
            let kernel = MatmulInputGradKernel {
                format: s.format,
                tensor_cores,
                tile,
            };
            let buffers = [&c.buf, &dy.t.buf, &dx.t.buf, &c.buf];
            let grid = [grid[0], grid[1], parts as u32];
            ops.push(Op::new(kernel, tile.workgroup(), &params, &buffers, grid));
            if split {
                slices += parts;
            }
        }
        if split {
            dx.check("matmul_input_grad scratch", slices * slice)?;
        }
        Ok((ops, slices))
    }
}
