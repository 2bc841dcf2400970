//! Backward of the gated linear unit [`crate::ops::glu`]: given `dy = dL/d(act(gate) * up)`,
//! `dgate = dy * up * act'(gate)` and `dup = dy * act(gate)`.
//!
//! WGSL: `elementwise/glu_backward.wgsl`, `elementwise/act.wgsl` (the forward's activations)
//! and `elementwise/act_grad.wgsl` (their analytic derivatives), `ACT` override as the forward.
//! 256 invocations per workgroup, one element each.

use crate::error::GpuError;
use crate::kernel::KernelFamily;
use crate::op::{Op, grid_1d};
use crate::ops::glu::{ACT, Activation};
use crate::pipeline::PipelineKey;
use crate::shader::{BindingKind, Program, ShaderFile, shader_file};
use crate::tensor::View;

#[cfg(any(test, feature = "parity"))]
mod parity;
#[cfg(any(test, feature = "parity"))]
pub use parity::{CHECK, glu_backward_ref};

#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub(crate) struct GluBackwardParams {
    pub n: u32,
    pub gate_offset: u32,
    pub up_offset: u32,
    pub dy_offset: u32,
    pub dgate_offset: u32,
    pub dup_offset: u32,
    pub _pad: [u32; 2],
}

static SHADER: ShaderFile = shader_file!("elementwise/glu_backward.wgsl");
static ACT_GRAD: ShaderFile = shader_file!("elementwise/act_grad.wgsl");

const BINDINGS: &[BindingKind] = &[
    BindingKind::Uniform,
    BindingKind::StorageRead,
    BindingKind::StorageRead,
    BindingKind::StorageRead,
    BindingKind::StorageReadWrite,
    BindingKind::StorageReadWrite,
];

const WORKGROUP: u32 = 256;

/// The glu backward kernel: the forward's activation (the `ACT` override).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GluBackwardKernel(pub Activation);

impl KernelFamily for GluBackwardKernel {
    fn variants() -> Vec<GluBackwardKernel> {
        vec![
            GluBackwardKernel(Activation::GeluTanh),
            GluBackwardKernel(Activation::Silu),
        ]
    }

    fn program(self) -> Program {
        Program {
            name: "glu_backward".to_string(),
            files: vec![&SHADER, &ACT, &ACT_GRAD],
            entry: "main",
            bindings: BINDINGS,
            params_size: size_of::<GluBackwardParams>(),
        }
    }

    fn constants(self) -> Vec<(&'static str, f64)> {
        vec![("ACT", self.0.code())]
    }

    fn pipeline_keys(self) -> Vec<PipelineKey> {
        vec![PipelineKey::new(self, WORKGROUP)]
    }

    #[cfg(any(test, feature = "parity"))]
    fn checks() -> Vec<crate::parity::Check> {
        vec![CHECK]
    }
}

/// The views of a GLU backward: the forward's inputs, the output's gradient and where the
/// inputs' gradients go.
#[derive(Debug, Clone, Copy)]
pub struct GluBackward<'a> {
    /// The forward's gate.
    pub gate: View<'a>,
    /// The forward's up.
    pub up: View<'a>,
    /// `dL/d(act(gate) * up)`.
    pub dy: View<'a>,
    /// Receives `dL/dgate`.
    pub dgate: View<'a>,
    /// Receives `dL/dup`.
    pub dup: View<'a>,
}

/// `dgate[..n] = dy * up * act'(gate)`, `dup[..n] = dy * act(gate)`. gate and up may be views
/// of one tensor, and so may dgate and dup (not overlapping); the outputs must be another
/// tensor than the inputs (wgpu forbids one buffer read and written in a dispatch).
pub fn glu_backward(act: Activation, v: GluBackward<'_>, n: usize) -> Result<Op, GpuError> {
    v.gate.check("glu_backward gate", n)?;
    v.up.check("glu_backward up", n)?;
    v.dy.check("glu_backward dy", n)?;
    v.dgate.check("glu_backward dgate", n)?;
    v.dup.check("glu_backward dup", n)?;
    let params = GluBackwardParams {
        n: n as u32,
        gate_offset: v.gate.offset as u32,
        up_offset: v.up.offset as u32,
        dy_offset: v.dy.offset as u32,
        dgate_offset: v.dgate.offset as u32,
        dup_offset: v.dup.offset as u32,
        _pad: [0; 2],
    };
    let buffers = [
        &v.gate.t.buf,
        &v.up.t.buf,
        &v.dy.t.buf,
        &v.dgate.t.buf,
        &v.dup.t.buf,
    ];
    let grid = grid_1d(n.div_ceil(WORKGROUP as usize));
    Ok(Op::new(
        GluBackwardKernel(act),
        WORKGROUP,
        &params,
        &buffers,
        grid,
    ))
}
