//! Elementwise ops over f32 words: in-place add (the residual; a bias row added to every row),
//! out-of-place add (`out = a + b`, where neither input may be written over) and copy.
//!
//! WGSL: `elementwise/add.wgsl`, `elementwise/add_out.wgsl`, `elementwise/copy.wgsl`. 256
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
pub use parity::{ADD_CHECK, ADD_OUT_CHECK, COPY_CHECK, add_ref};

#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub(crate) struct AddParams {
    pub n: u32,
    pub dst_offset: u32,
    pub src_offset: u32,
    /// `src` is read at `i % src_period` (n for a plain add, the row length for a bias).
    pub src_period: u32,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub(crate) struct AddOutParams {
    pub n: u32,
    pub out_offset: u32,
    pub a_offset: u32,
    pub b_offset: u32,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub(crate) struct CopyParams {
    pub n: u32,
    pub dst_offset: u32,
    pub src_offset: u32,
    pub _pad: u32,
}

static ADD: ShaderFile = shader_file!("elementwise/add.wgsl");
static ADD_OUT: ShaderFile = shader_file!("elementwise/add_out.wgsl");
static COPY: ShaderFile = shader_file!("elementwise/copy.wgsl");

const ADD_BINDINGS: &[BindingKind] = &[
    BindingKind::Uniform,
    BindingKind::StorageReadWrite,
    BindingKind::StorageRead,
];
const ADD_OUT_BINDINGS: &[BindingKind] = &[
    BindingKind::Uniform,
    BindingKind::StorageRead,
    BindingKind::StorageRead,
    BindingKind::StorageReadWrite,
];
const COPY_BINDINGS: &[BindingKind] = &[
    BindingKind::Uniform,
    BindingKind::StorageRead,
    BindingKind::StorageReadWrite,
];

pub(crate) const WORKGROUP: u32 = 256;

/// The elementwise kernels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ElementwiseKernel {
    /// `dst += src` (src repeating with a period: bias rows).
    Add,
    /// `out = a + b`.
    AddOut,
    /// `dst = src`.
    Copy,
}

impl KernelFamily for ElementwiseKernel {
    fn variants() -> Vec<ElementwiseKernel> {
        vec![
            ElementwiseKernel::Add,
            ElementwiseKernel::AddOut,
            ElementwiseKernel::Copy,
        ]
    }

    fn program(self) -> Program {
        match self {
            ElementwiseKernel::Add => Program {
                name: "add".to_string(),
                files: vec![&ADD],
                entry: "main",
                bindings: ADD_BINDINGS,
                params_size: size_of::<AddParams>(),
            },
            ElementwiseKernel::AddOut => Program {
                name: "add_out".to_string(),
                files: vec![&ADD_OUT],
                entry: "main",
                bindings: ADD_OUT_BINDINGS,
                params_size: size_of::<AddOutParams>(),
            },
            ElementwiseKernel::Copy => Program {
                name: "copy".to_string(),
                files: vec![&COPY],
                entry: "main",
                bindings: COPY_BINDINGS,
                params_size: size_of::<CopyParams>(),
            },
        }
    }

    fn pipeline_keys(self) -> Vec<PipelineKey> {
        vec![PipelineKey::new(self, WORKGROUP)]
    }

    #[cfg(any(test, feature = "parity"))]
    fn checks() -> Vec<crate::parity::Check> {
        vec![ADD_CHECK, ADD_OUT_CHECK, COPY_CHECK]
    }
}

fn add_op(dst: View<'_>, src: View<'_>, n: usize, period: usize) -> Result<Op, GpuError> {
    dst.check("add dst", n)?;
    src.check("add src", period.min(n))?;
    let params = AddParams {
        n: n as u32,
        dst_offset: dst.offset as u32,
        src_offset: src.offset as u32,
        src_period: period.max(1) as u32,
    };
    let grid = grid_1d(n.div_ceil(WORKGROUP as usize));
    Ok(Op::new(
        ElementwiseKernel::Add,
        WORKGROUP,
        &params,
        &[&dst.t.buf, &src.t.buf],
        grid,
    ))
}

/// `dst[..n] += src[..n]`; `dst` and `src` must be different tensors.
pub fn add_inplace(dst: View<'_>, src: View<'_>, n: usize) -> Result<Op, GpuError> {
    add_op(dst, src, n, n)
}

/// `dst[r * n + i] += bias[i]` for `n_rows` rows of `n` (Qwen2's q/k/v biases).
pub fn add_rows(dst: View<'_>, bias: View<'_>, n_rows: usize, n: usize) -> Result<Op, GpuError> {
    add_op(dst, bias, n_rows * n, n)
}

/// `out[..n] = a[..n] + b[..n]`; `out` must be another tensor than `a` and `b` (which may be
/// one tensor).
pub fn add(a: View<'_>, b: View<'_>, out: View<'_>, n: usize) -> Result<Op, GpuError> {
    a.check("add a", n)?;
    b.check("add b", n)?;
    out.check("add out", n)?;
    let params = AddOutParams {
        n: n as u32,
        out_offset: out.offset as u32,
        a_offset: a.offset as u32,
        b_offset: b.offset as u32,
    };
    let grid = grid_1d(n.div_ceil(WORKGROUP as usize));
    Ok(Op::new(
        ElementwiseKernel::AddOut,
        WORKGROUP,
        &params,
        &[&a.t.buf, &b.t.buf, &out.t.buf],
        grid,
    ))
}

/// `dst[..n] = src[..n]` (any 4-byte elements); `dst` and `src` must be different tensors.
pub fn copy(src: View<'_>, dst: View<'_>, n: usize) -> Result<Op, GpuError> {
    src.check("copy src", n)?;
    dst.check("copy dst", n)?;
    let params = CopyParams {
        n: n as u32,
        dst_offset: dst.offset as u32,
        src_offset: src.offset as u32,
        _pad: 0,
    };
    let grid = grid_1d(n.div_ceil(WORKGROUP as usize));
    Ok(Op::new(
        ElementwiseKernel::Copy,
        WORKGROUP,
        &params,
        &[&src.t.buf, &dst.t.buf],
        grid,
    ))
}
