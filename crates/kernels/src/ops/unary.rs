//! In-place unary maps: scale (`x *= s`) and logit soft-cap (`x = c * tanh(x / c)`, Gemma 2's
//! attention and Gemma's final logits).
//!
//! WGSL: `elementwise/unary.wgsl`, the map chosen by the `OP` override (part of the pipeline
//! key). 256 invocations per workgroup, one element each.

use crate::error::GpuError;
use crate::kernel::KernelFamily;
use crate::op::{Op, grid_1d};
use crate::shader::{BindingKind, Program, ShaderFile, shader_file};
use crate::tensor::View;

#[cfg(any(test, feature = "parity"))]
mod parity;
#[cfg(any(test, feature = "parity"))]
pub use parity::{CHECK, bound};

/// Which map.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum UnaryOp {
    /// `x * value`.
    Scale,
    /// `value * tanh(x / value)`.
    SoftCap,
}

impl UnaryOp {
    pub(crate) fn code(self) -> f64 {
        match self {
            UnaryOp::Scale => 0.0,
            UnaryOp::SoftCap => 1.0,
        }
    }
}

#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub(crate) struct UnaryParams {
    pub n: u32,
    pub offset: u32,
    pub value: f32,
    pub _pad: u32,
}

static SHADER: ShaderFile = shader_file!("elementwise/unary.wgsl");

const BINDINGS: &[BindingKind] = &[BindingKind::Uniform, BindingKind::StorageReadWrite];

pub(crate) const WORKGROUP: u32 = 256;

/// The unary kernel: its map (the `OP` override).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UnaryKernel(pub UnaryOp);

impl KernelFamily for UnaryKernel {
    fn variants() -> Vec<UnaryKernel> {
        vec![UnaryKernel(UnaryOp::Scale), UnaryKernel(UnaryOp::SoftCap)]
    }

    fn program(self) -> Program {
        Program {
            name: "unary".to_string(),
            files: vec![&SHADER],
            entry: "main",
            bindings: BINDINGS,
            params_size: size_of::<UnaryParams>(),
        }
    }

    fn constants(self) -> Vec<(&'static str, f64)> {
        vec![("OP", self.0.code())]
    }

    #[cfg(any(test, feature = "parity"))]
    fn checks() -> Vec<crate::parity::Check> {
        vec![CHECK]
    }
}

/// `x[..n] = op(x[..n], value)` in place.
pub fn unary(op: UnaryOp, x: View<'_>, n: usize, value: f32) -> Result<Op, GpuError> {
    x.check("unary x", n)?;
    let params = UnaryParams {
        n: n as u32,
        offset: x.offset as u32,
        value,
        _pad: 0,
    };
    let grid = grid_1d(n.div_ceil(WORKGROUP as usize));
    Ok(Op::new(
        UnaryKernel(op),
        WORKGROUP,
        &params,
        &[&x.t.buf],
        grid,
    ))
}

/// `x *= s`.
pub fn scale(x: View<'_>, n: usize, s: f32) -> Result<Op, GpuError> {
    unary(UnaryOp::Scale, x, n, s)
}

/// `x = cap * tanh(x / cap)`.
pub fn softcap(x: View<'_>, n: usize, cap: f32) -> Result<Op, GpuError> {
    unary(UnaryOp::SoftCap, x, n, cap)
}
