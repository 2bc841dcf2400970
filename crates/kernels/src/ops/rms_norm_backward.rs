//! Backward of the RMS norm over rows ([`crate::ops::norm::RmsNorm`]): given `dy = dL/dy` for
//! `y = x / rms(x) * g`, `dx = r (dy g - xhat mean(dy g xhat))` with `r = 1 / rms(x)` and
//! `xhat = x r`. The gain is the vector the forward multiplies by, as stored (Gemma's GGUF
//! gains already hold its `+1`), so the kernel needs no Gemma variant. The gain's own gradient
//! (`sum over rows of dy xhat`) is in the CPU reference only: LoRA training freezes the gains.
//!
//! WGSL: `norm/rms_norm_backward.wgsl` + `norm/reduce.wgsl` + `norm/gain_weighted.wgsl` or
//! `norm/gain_none.wgsl`. One workgroup of 256 per row (a vector, or per-head norms over
//! `[n_heads, head_dim]` as `n_heads` rows).

use crate::error::GpuError;
use crate::kernel::KernelFamily;
use crate::op::{Op, grid_1d};
use crate::ops::norm::{REDUCE, RmsNorm};
use crate::pipeline::PipelineKey;
use crate::shader::{BindingKind, Program, ShaderFile, shader_file};
use crate::tensor::{GpuTensor, View};

#[cfg(any(test, feature = "parity"))]
mod parity;
#[cfg(any(test, feature = "parity"))]
pub use parity::{CHECK, rms_norm_backward_ref};

#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub(crate) struct RmsNormBackwardParams {
    pub n: u32,
    pub n_rows: u32,
    pub x_offset: u32,
    pub dy_offset: u32,
    pub dx_offset: u32,
    pub eps: f32,
    pub _pad: [u32; 2],
}

static SHADER: ShaderFile = shader_file!("norm/rms_norm_backward.wgsl");
static GAIN_WEIGHTED: ShaderFile = shader_file!("norm/gain_weighted.wgsl");
static GAIN_NONE: ShaderFile = shader_file!("norm/gain_none.wgsl");

const BINDINGS: &[BindingKind] = &[
    BindingKind::Uniform,
    BindingKind::StorageRead,
    BindingKind::StorageRead,
    BindingKind::StorageReadWrite,
];
const BINDINGS_WEIGHTED: &[BindingKind] = &[
    BindingKind::Uniform,
    BindingKind::StorageRead,
    BindingKind::StorageRead,
    BindingKind::StorageReadWrite,
    BindingKind::StorageRead,
];

const WORKGROUP: u32 = 256;

/// The RMS norm backward kernel: with or without the forward's gain vector.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RmsNormBackwardKernel {
    /// The forward multiplied by a gain vector (`norm/gain_weighted.wgsl`).
    pub weighted: bool,
}

impl KernelFamily for RmsNormBackwardKernel {
    fn variants() -> Vec<RmsNormBackwardKernel> {
        vec![
            RmsNormBackwardKernel { weighted: false },
            RmsNormBackwardKernel { weighted: true },
        ]
    }

    fn program(self) -> Program {
        let (name, gain, bindings) = if self.weighted {
            (
                "rms_norm_backward_weighted",
                &GAIN_WEIGHTED,
                BINDINGS_WEIGHTED,
            )
        } else {
            ("rms_norm_backward", &GAIN_NONE, BINDINGS)
        };
        Program {
            name: name.to_string(),
            files: vec![&SHADER, &REDUCE, gain],
            entry: "main",
            bindings,
            params_size: size_of::<RmsNormBackwardParams>(),
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

impl RmsNorm {
    /// The backward of [`RmsNorm::op`] row by row: `dx` from the forward's input `x`, its gain
    /// (`None` where the forward had none) and `dy`. `dx` must be another tensor than `x`, `dy`
    /// and the weight (wgpu forbids one buffer read and written in a dispatch).
    pub fn backward_op(
        self,
        x: View<'_>,
        dy: View<'_>,
        dx: View<'_>,
        weight: Option<&GpuTensor>,
    ) -> Result<Op, GpuError> {
        let len = self.n * self.n_rows;
        x.check("rms_norm_backward x", len)?;
        dy.check("rms_norm_backward dy", len)?;
        dx.check("rms_norm_backward dx", len)?;
        if let Some(w) = weight {
            View::from(w).check("rms_norm_backward weight", self.n)?;
        }
        let params = RmsNormBackwardParams {
            n: self.n as u32,
            n_rows: self.n_rows as u32,
            x_offset: x.offset as u32,
            dy_offset: dy.offset as u32,
            dx_offset: dx.offset as u32,
            eps: self.eps,
            _pad: [0; 2],
        };
        let kernel = RmsNormBackwardKernel {
            weighted: weight.is_some(),
        };
        let mut buffers = vec![&x.t.buf, &dy.t.buf, &dx.t.buf];
        buffers.extend(weight.map(|w| &w.buf));
        Ok(Op::new(
            kernel,
            WORKGROUP,
            &params,
            &buffers,
            grid_1d(self.n_rows),
        ))
    }
}
