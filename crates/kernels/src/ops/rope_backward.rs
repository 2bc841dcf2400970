//! Backward of rotary position embedding ([`crate::ops::rope::Rope`]): each pair's rotation is
//! orthogonal, so `dL/dx` is `dL/dy` turned by the transpose, the angle `-pos * freq`, in place.
//!
//! WGSL: the forward's `rope/rope.wgsl` with its `BACKWARD` override set (the same sin and cos,
//! the sine negated), `NEOX` as the forward: both pairings.

use crate::error::GpuError;
use crate::kernel::KernelFamily;
use crate::op::Op;
use crate::ops::rope::{BINDINGS, Rope, RopeParams, RopeStyle, SHADER, WORKGROUP};
use crate::pipeline::PipelineKey;
use crate::shader::Program;
use crate::tensor::{GpuTensor, View};

#[cfg(any(test, feature = "parity"))]
mod parity;
#[cfg(any(test, feature = "parity"))]
pub use parity::CHECK;

/// The rope backward kernel: the forward's pairing (the `NEOX` override).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RopeBackwardKernel(pub RopeStyle);

impl KernelFamily for RopeBackwardKernel {
    fn variants() -> Vec<RopeBackwardKernel> {
        vec![
            RopeBackwardKernel(RopeStyle::Normal),
            RopeBackwardKernel(RopeStyle::Neox),
        ]
    }

    fn program(self) -> Program {
        Program {
            name: "rope_backward".to_string(),
            files: vec![&SHADER],
            entry: "main",
            bindings: BINDINGS,
            params_size: size_of::<RopeParams>(),
        }
    }

    fn constants(self) -> Vec<(&'static str, f64)> {
        vec![("NEOX", self.0.code()), ("BACKWARD", 1.0)]
    }

    fn pipeline_keys(self) -> Vec<PipelineKey> {
        vec![PipelineKey::new(self, WORKGROUP)]
    }

    #[cfg(any(test, feature = "parity"))]
    fn checks() -> Vec<crate::parity::Check> {
        vec![CHECK]
    }
}

impl Rope {
    /// The backward of [`Rope::op`]: turns `dy` (the gradient of the rotated rows) back into
    /// the gradient of the rows before the rotation, in place; positions and frequencies as
    /// the forward's.
    pub fn backward_op(
        self,
        dy: View<'_>,
        pos: View<'_>,
        freqs: &GpuTensor,
    ) -> Result<Op, GpuError> {
        let (params, grid) = self.params(true, dy, pos, freqs)?;
        let buffers = [&dy.t.buf, &pos.t.buf, &freqs.buf];
        Ok(Op::new(
            RopeBackwardKernel(self.style),
            WORKGROUP,
            &params,
            &buffers,
            grid,
        ))
    }
}
