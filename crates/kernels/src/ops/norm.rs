//! RMS norm over rows, with an optional gain vector shared by all rows.
//!
//! WGSL: `norm/rms_norm.wgsl` (entry `main`, or `main_weighted` with the weight bound) +
//! `norm/io_separate.wgsl` (x read, y written) or `norm/io_inplace.wgsl` (one read-write
//! buffer: per-head q/k norms in place) + `norm/reduce.wgsl` (the workgroup sum). One
//! workgroup of 256 per row. A whole vector is one row; per-head norms over
//! `[n_heads, head_dim]` are `n_heads` rows of `head_dim`.

use crate::error::GpuError;
use crate::kernel::KernelFamily;
use crate::op::{Op, grid_1d};
use crate::pipeline::PipelineKey;
use crate::shader::{BindingKind, Program, ShaderFile, shader_file};
use crate::tensor::{GpuTensor, View};

#[cfg(any(test, feature = "parity"))]
mod parity;
#[cfg(any(test, feature = "parity"))]
pub use parity::CHECK;

#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub(crate) struct RmsNormParams {
    pub n: u32,
    pub n_rows: u32,
    pub x_offset: u32,
    pub y_offset: u32,
    pub eps: f32,
    pub _pad: [u32; 3],
}

static SHADER: ShaderFile = shader_file!("norm/rms_norm.wgsl");
static IO_SEPARATE: ShaderFile = shader_file!("norm/io_separate.wgsl");
static IO_INPLACE: ShaderFile = shader_file!("norm/io_inplace.wgsl");
/// `workgroup_sum`, the tree reduction every norm kernel shares.
pub(crate) static REDUCE: ShaderFile = shader_file!("norm/reduce.wgsl");

const BINDINGS: &[BindingKind] = &[
    BindingKind::Uniform,
    BindingKind::StorageRead,
    BindingKind::StorageReadWrite,
];
const BINDINGS_WEIGHTED: &[BindingKind] = &[
    BindingKind::Uniform,
    BindingKind::StorageRead,
    BindingKind::StorageReadWrite,
    BindingKind::StorageRead,
];
const BINDINGS_INPLACE: &[BindingKind] = &[BindingKind::Uniform, BindingKind::StorageReadWrite];
const BINDINGS_INPLACE_WEIGHTED: &[BindingKind] = &[
    BindingKind::Uniform,
    BindingKind::StorageReadWrite,
    BindingKind::StorageRead,
];

pub(crate) const WORKGROUP: u32 = 256;

/// The RMS norm kernel: with or without a gain vector, out of place or in place.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RmsNormKernel {
    /// Rows multiplied by a gain vector (entry `main_weighted`).
    pub weighted: bool,
    /// One read-write buffer (`norm/io_inplace.wgsl`) instead of x read and y written.
    pub in_place: bool,
}

impl KernelFamily for RmsNormKernel {
    fn variants() -> Vec<RmsNormKernel> {
        let mut all = Vec::new();
        for weighted in [false, true] {
            for in_place in [false, true] {
                all.push(RmsNormKernel { weighted, in_place });
            }
        }
        all
    }

    fn program(self) -> Program {
        let RmsNormKernel { weighted, in_place } = self;
        let name = match (weighted, in_place) {
            (false, false) => "rms_norm",
            (true, false) => "rms_norm_weighted",
            (false, true) => "rms_norm_inplace",
            (true, true) => "rms_norm_inplace_weighted",
        };
        Program {
            name: name.to_string(),
            files: vec![
                &SHADER,
                &REDUCE,
                if in_place { &IO_INPLACE } else { &IO_SEPARATE },
            ],
            entry: if weighted { "main_weighted" } else { "main" },
            bindings: match (weighted, in_place) {
                (false, false) => BINDINGS,
                (true, false) => BINDINGS_WEIGHTED,
                (false, true) => BINDINGS_INPLACE,
                (true, true) => BINDINGS_INPLACE_WEIGHTED,
            },
            params_size: size_of::<RmsNormParams>(),
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

/// Shape of an RMS norm: `n_rows` rows of `n`.
#[derive(Debug, Clone, Copy)]
pub struct RmsNorm {
    /// Values per row.
    pub n: usize,
    /// Rows.
    pub n_rows: usize,
    /// Added to the mean square.
    pub eps: f32,
}

impl RmsNorm {
    /// `y = x / rms(x) [* weight]` row by row. `x` and `y` must be different tensors
    /// (wgpu forbids one buffer as read and read-write in a dispatch; use [`RmsNorm::op_inplace`]).
    pub fn op(self, x: View<'_>, y: View<'_>, weight: Option<&GpuTensor>) -> Result<Op, GpuError> {
        self.build(x, Some(y), weight)
    }

    /// `x = x / rms(x) [* weight]` row by row, in place (per-head q/k norms).
    pub fn op_inplace(self, x: View<'_>, weight: Option<&GpuTensor>) -> Result<Op, GpuError> {
        self.build(x, None, weight)
    }

    fn build(
        self,
        x: View<'_>,
        y: Option<View<'_>>,
        weight: Option<&GpuTensor>,
    ) -> Result<Op, GpuError> {
        x.check("rms_norm x", self.n * self.n_rows)?;
        if let Some(y) = y {
            y.check("rms_norm y", self.n * self.n_rows)?;
        }
        let in_place = y.is_none();
        let y = y.unwrap_or(x);
        let params = RmsNormParams {
            n: self.n as u32,
            n_rows: self.n_rows as u32,
            x_offset: x.offset as u32,
            y_offset: y.offset as u32,
            eps: self.eps,
            _pad: [0; 3],
        };
        let grid = grid_1d(self.n_rows);
        if let Some(w) = weight {
            View::from(w).check("rms_norm weight", self.n)?;
        }
        let kernel = RmsNormKernel {
            weighted: weight.is_some(),
            in_place,
        };
        let mut buffers = vec![&x.t.buf];
        if !in_place {
            buffers.push(&y.t.buf);
        }
        buffers.extend(weight.map(|w| &w.buf));
        Ok(Op::new(kernel, WORKGROUP, &params, &buffers, grid))
    }
}
