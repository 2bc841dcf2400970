//! Greedy sampling: the index of the largest logit, written to a `u32` GPU buffer (where the
//! next step's embedding gather reads it).
//!
//! WGSL: `sampling/argmax.wgsl`. One workgroup of 256 strides over the vector, then reduces
//! (value, index) pairs; ties go to the lowest index. (A 262k vocabulary is 1k loads per
//! invocation; a two-stage version is the next step if it shows in profiles.)

use crate::error::GpuError;
use crate::op::Op;
use crate::pipeline::Kernel;
use crate::shader::{BindingKind, Program, ShaderFile, shader_file};
use crate::tensor::View;

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

pub(crate) fn program() -> Program {
    Program {
        name: "argmax".to_string(),
        files: vec![&SHADER],
        entry: "main",
        bindings: BINDINGS,
        params_size: size_of::<ArgmaxParams>(),
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
        Kernel::Argmax,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{gpu, random_f32};
    use crate::{GpuTensor, Readback, StepBuilder};
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 6, ..ProptestConfig::default() })]
        /// Tolerance: exact (comparisons only). Values are drawn from 16 levels so ties occur.
        #[test]
        fn argmax_matches_reference(n in 1usize..5000, seed in any::<u64>()) {
            let Some(gpu) = gpu() else { return Ok(()) };
            let x: Vec<f32> = random_f32(n, seed).iter().map(|v| (v * 8.0).round()).collect();
            let xt = GpuTensor::from_f32(gpu, &[n], &x);
            let out = GpuTensor::from_u32(gpu, &[2], &[7, 7]);
            let mut b = StepBuilder::new();
            b.push(argmax((&xt).into(), n, View::at(&out, 1)).unwrap());
            let mut step = b.build(gpu);
            let mut got = [0u32; 2];
            Readback::new(gpu, 8).run_and_read(gpu, &mut step, &out, 0, &mut got).unwrap();
            prop_assert_eq!(got, [7, argmax_ref(&x)]);
        }
    }
}
