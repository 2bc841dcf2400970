//! Greedy sampling: the index of the largest logit, written to a `u32` GPU buffer (where the
//! next step's embedding gather reads it).
//!
//! WGSL: `sampling/argmax.wgsl`. One workgroup of 256 strides over the vector, then reduces
//! (value, index) pairs; ties go to the lowest index. (A 262k vocabulary is 1k loads per
//! invocation; a two-stage version is the next step if it shows in profiles.)

use crate::device::Gpu;
use crate::error::GpuError;
use crate::kernel::KernelFamily;
use crate::op::Op;
use crate::parity::data::{Rng, random_f32};
use crate::parity::{Check, Compare, run_read};
use crate::shader::{BindingKind, Program, ShaderFile, shader_file};
use crate::tensor::{GpuTensor, View};

#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct ArgmaxParams {
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

pub const WORKGROUP: u32 = 256;

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

    #[cfg(any(test, feature = "parity"))]
    fn checks() -> Vec<Check> {
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

/// CPU reference: first index of the maximum, NaNs ignored (`u32::MAX` if all are NaN).
pub fn argmax_ref(x: &[f32]) -> u32 {
    let mut best: Option<(usize, f32)> = None;
    for (i, &v) in x.iter().enumerate() {
        if !v.is_nan() && best.is_none_or(|(_, b)| v > b) {
            best = Some((i, v));
        }
    }
    best.map_or(u32::MAX, |(i, _)| i as u32)
}

/// Tolerance: exact (comparisons only). Values are drawn from 16 levels so ties occur.
pub const CHECK: Check = Check {
    name: "argmax",
    tolerance: "exact",
    case: parity_case,
};

fn parity_case(gpu: &Gpu, rng: &mut Rng) -> Result<Compare, GpuError> {
    let n = rng.range(1, 5000);
    let x: Vec<f32> = random_f32(n, rng.next_u64())
        .iter()
        .map(|v| (v * 8.0).round())
        .collect();
    let xt = GpuTensor::from_f32(gpu, &[n], &x);
    let out = GpuTensor::from_u32(gpu, &[2], &[7, 7]);
    let got: Vec<u32> = run_read(
        gpu,
        vec![argmax((&xt).into(), n, View::at(&out, 1))?],
        &out,
        0,
        2,
    )?;
    let mut c = Compare::default();
    c.exact(f64::from(got[0]), 7.0, || "untouched neighbour".into());
    c.exact(f64::from(got[1]), f64::from(argmax_ref(&x)), || {
        format!("argmax of {n}")
    });
    Ok(c)
}

#[cfg(test)]
mod tests {
    use crate::testutil;

    #[test]
    fn argmax_matches_reference() {
        testutil::parity("argmax", 6, 51);
    }
}
