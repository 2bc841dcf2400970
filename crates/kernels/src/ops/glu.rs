//! Gated linear units: `out = act(gate) * up` with GELU (tanh form, GEGLU) or SiLU (SwiGLU).
//!
//! WGSL: `elementwise/glu.wgsl` + `elementwise/act.wgsl` (the activations, chosen by the `ACT`
//! override, part of the pipeline key; shared with the matvec's GLU input,
//! [`crate::ops::matvec::matvec_glu`]). 256 invocations per workgroup, one element each.

use crate::error::GpuError;
use crate::kernel::KernelFamily;
use crate::op::{Op, grid_1d};
use crate::pipeline::PipelineKey;
use crate::shader::{BindingKind, Program, ShaderFile, shader_file};
use crate::tensor::View;

#[cfg(any(test, feature = "parity"))]
mod parity;
#[cfg(any(test, feature = "parity"))]
pub use parity::{CHECK, glu_ref, tolerance};

/// The activation of a gated linear unit's gate, `act(gate) * up` (a gated FFN): the
/// architecture decides (GEGLU for Gemma, SwiGLU for Llama and Qwen). The kernels that apply
/// one (the glu kernel, the matvec's GLU input and GLU epilogue, the q8 quantize of a GLU)
/// share its WGSL, `elementwise/act.wgsl`, chosen by the `ACT` override.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Activation {
    /// `0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`, as llama.cpp's `ggml_gelu` (Gemma).
    GeluTanh,
    /// `x / (1 + e^-x)` (Llama, Qwen).
    Silu,
}

impl Activation {
    /// The value of the WGSL `ACT` override.
    pub(crate) fn code(self) -> f64 {
        match self {
            Activation::GeluTanh => 0.0,
            Activation::Silu => 1.0,
        }
    }
}

#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub(crate) struct GluParams {
    pub n: u32,
    pub gate_offset: u32,
    pub up_offset: u32,
    pub out_offset: u32,
}

static SHADER: ShaderFile = shader_file!("elementwise/glu.wgsl");
/// The activations (`act(x)`, `ACT` override), for every kernel that applies one.
pub(crate) static ACT: ShaderFile = shader_file!("elementwise/act.wgsl");

const BINDINGS: &[BindingKind] = &[
    BindingKind::Uniform,
    BindingKind::StorageRead,
    BindingKind::StorageRead,
    BindingKind::StorageReadWrite,
];

pub(crate) const WORKGROUP: u32 = 256;

/// The glu kernel: its activation (the `ACT` override).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GluKernel(pub Activation);

impl KernelFamily for GluKernel {
    fn variants() -> Vec<GluKernel> {
        vec![GluKernel(Activation::GeluTanh), GluKernel(Activation::Silu)]
    }

    fn program(self) -> Program {
        Program {
            name: "glu".to_string(),
            files: vec![&SHADER, &ACT],
            entry: "main",
            bindings: BINDINGS,
            params_size: size_of::<GluParams>(),
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

/// `out[..n] = act(gate[..n]) * up[..n]`; gate and up may be views of one tensor, `out` must
/// be another.
pub fn glu(
    act: Activation,
    gate: View<'_>,
    up: View<'_>,
    out: View<'_>,
    n: usize,
) -> Result<Op, GpuError> {
    gate.check("glu gate", n)?;
    up.check("glu up", n)?;
    out.check("glu out", n)?;
    let params = GluParams {
        n: n as u32,
        gate_offset: gate.offset as u32,
        up_offset: up.offset as u32,
        out_offset: out.offset as u32,
    };
    let buffers = [&gate.t.buf, &up.t.buf, &out.t.buf];
    let grid = grid_1d(n.div_ceil(WORKGROUP as usize));
    Ok(Op::new(GluKernel(act), WORKGROUP, &params, &buffers, grid))
}
