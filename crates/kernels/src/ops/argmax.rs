//! Greedy sampling: the index of the largest logit, written to a `u32` GPU buffer (where the
//! next step's embedding gather reads it).
//!
//! WGSL: `sampling/argmax.wgsl`. One workgroup of 256 strides over the vector, then reduces
//! (value, index) pairs; ties go to the lowest index. (A 262k vocabulary is 1k loads per
//! invocation; a two-stage version is the next step if it shows in profiles.)

use crate::error::GpuError;
use crate::kernel::KernelFamily;
use crate::op::Op;
use crate::pipeline::PipelineKey;
use crate::shader::{BindingKind, Program, ShaderFile, shader_file};
use crate::tensor::View;

#[cfg(any(test, feature = "parity"))]
mod parity;
#[cfg(any(test, feature = "parity"))]
pub use parity::{CHECK, argmax_ref};

#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub(crate) struct ArgmaxParams {
    pub n: u32,
    pub x_offset: u32,
    pub out_index: u32,
    pub _pad: u32,
}

static SHADER: ShaderFile = shader_file!("sampling/argmax.wgsl");

const BINDINGS: &[BindingKind] = &[
    BindingKind::Uniform,
    BindingKind::StorageRead,
    BindingKind::StorageReadWrite,
];

pub(crate) const WORKGROUP: u32 = 256;

/// The argmax kernel (one variant).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ArgmaxKernel;

impl KernelFamily for ArgmaxKernel {
    fn variants() -> Vec<ArgmaxKernel> {
        vec![ArgmaxKernel]
    }

    fn program(self) -> Program {
        Program {
            name: "argmax".to_string(),
            files: vec![&SHADER],
            entry: "main",
            bindings: BINDINGS,
            params_size: size_of::<ArgmaxParams>(),
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

/// `out[out.offset] = argmax(x[x.offset..][..n])`.
pub fn argmax(x: View<'_>, n: usize, out: View<'_>) -> Result<Op, GpuError> {
    x.check("argmax x", n)?;
    out.check("argmax out", 1)?;
    let params = ArgmaxParams {
        n: n as u32,
        x_offset: x.offset as u32,
        out_index: out.offset as u32,
        _pad: 0,
    };
    Ok(Op::new(
        ArgmaxKernel,
        WORKGROUP,
        &params,
        &[&x.t.buf, &out.t.buf],
        [1, 1, 1],
    ))
}
