//! Unary maps: scale (`x *= s`) and logit soft-cap (`x = c * tanh(x / c)`, Gemma 2's
//! attention and Gemma's final logits), in place or out of place (`y = f(x)`, for an input
//! that lives on: one dispatch where a copy and the in-place map made two).
//!
//! WGSL: `elementwise/unary_map.wgsl` (the map, chosen by the `OP` override, part of the
//! pipeline key) with `elementwise/unary.wgsl` (in place) or `elementwise/unary_out.wgsl`. 256
//! invocations per workgroup, one element each.

use crate::error::GpuError;
use crate::kernel::KernelFamily;
use crate::op::{Op, grid_1d};
use crate::pipeline::PipelineKey;
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
    /// The output's offset (out of place only).
    pub y_offset: u32,
}

static MAP: ShaderFile = shader_file!("elementwise/unary_map.wgsl");
static IN_PLACE: ShaderFile = shader_file!("elementwise/unary.wgsl");
static OUT: ShaderFile = shader_file!("elementwise/unary_out.wgsl");

const BINDINGS: &[BindingKind] = &[BindingKind::Uniform, BindingKind::StorageReadWrite];
const OUT_BINDINGS: &[BindingKind] = &[
    BindingKind::Uniform,
    BindingKind::StorageRead,
    BindingKind::StorageReadWrite,
];

pub(crate) const WORKGROUP: u32 = 256;

/// The unary kernel: its map (the `OP` override), in place or not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UnaryKernel {
    /// The map.
    pub op: UnaryOp,
    /// `y = f(x)` into another tensor (else `x = f(x)`).
    pub out_of_place: bool,
}

impl KernelFamily for UnaryKernel {
    fn variants() -> Vec<UnaryKernel> {
        [UnaryOp::Scale, UnaryOp::SoftCap]
            .into_iter()
            .flat_map(|op| [false, true].map(|out_of_place| UnaryKernel { op, out_of_place }))
            .collect()
    }

    fn program(self) -> Program {
        let (name, main, bindings) = match self.out_of_place {
            false => ("unary", &IN_PLACE, BINDINGS),
            true => ("unary_out", &OUT, OUT_BINDINGS),
        };
        Program {
            name: name.to_string(),
            files: vec![&MAP, main],
            entry: "main",
            bindings,
            params_size: size_of::<UnaryParams>(),
        }
    }

    fn constants(self) -> Vec<(&'static str, f64)> {
        vec![("OP", self.op.code())]
    }

    fn pipeline_keys(self) -> Vec<PipelineKey> {
        vec![PipelineKey::new(self, WORKGROUP)]
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
        y_offset: 0,
    };
    let grid = grid_1d(n.div_ceil(WORKGROUP as usize));
    let kernel = UnaryKernel {
        op,
        out_of_place: false,
    };
    Ok(Op::new(kernel, WORKGROUP, &params, &[&x.t.buf], grid))
}

/// `y[..n] = op(x[..n], value)`; `y` must be another tensor than `x`.
pub fn unary_out(
    op: UnaryOp,
    x: View<'_>,
    y: View<'_>,
    n: usize,
    value: f32,
) -> Result<Op, GpuError> {
    x.check("unary x", n)?;
    y.check("unary y", n)?;
    let params = UnaryParams {
        n: n as u32,
        offset: x.offset as u32,
        value,
        y_offset: y.offset as u32,
    };
    let grid = grid_1d(n.div_ceil(WORKGROUP as usize));
    let kernel = UnaryKernel {
        op,
        out_of_place: true,
    };
    Ok(Op::new(
        kernel,
        WORKGROUP,
        &params,
        &[&x.t.buf, &y.t.buf],
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

/// `y = x * s`.
pub fn scale_out(x: View<'_>, y: View<'_>, n: usize, s: f32) -> Result<Op, GpuError> {
    unary_out(UnaryOp::Scale, x, y, n, s)
}

/// `y = cap * tanh(x / cap)`.
pub fn softcap_out(x: View<'_>, y: View<'_>, n: usize, cap: f32) -> Result<Op, GpuError> {
    unary_out(UnaryOp::SoftCap, x, y, n, cap)
}
