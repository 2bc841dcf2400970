//! In-place add: `dst += src` (the residual connection).
//!
//! WGSL: `elementwise/add.wgsl`. 256 invocations per workgroup, one element each.

use crate::error::GpuError;
use crate::op::{Op, grid_1d};
use crate::pipeline::Kernel;
use crate::shader::{BindingKind, Program, ShaderFile, shader_file};
use crate::tensor::View;

#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct AddParams {
    pub n: u32,
    pub dst_offset: u32,
    pub src_offset: u32,
    pub _pad: u32,
}

static SHADER: ShaderFile = shader_file!("elementwise/add.wgsl");

const BINDINGS: &[BindingKind] = &[
    BindingKind::Uniform,
    BindingKind::StorageReadWrite,
    BindingKind::StorageRead,
];

pub const WORKGROUP: u32 = 256;

pub(crate) fn program() -> Program {
    Program {
        name: "add".to_string(),
        files: vec![&SHADER],
        entry: "main",
        bindings: BINDINGS,
        params_size: size_of::<AddParams>(),
    }
}

/// `dst[..n] += src[..n]`; `dst` and `src` must be different tensors.
pub fn add_inplace(dst: View<'_>, src: View<'_>, n: usize) -> Result<Op, GpuError> {
    dst.check("add dst", n)?;
    src.check("add src", n)?;
    let params = AddParams {
        n: n as u32,
        dst_offset: dst.offset as u32,
        src_offset: src.offset as u32,
        _pad: 0,
    };
    let grid = grid_1d(n.div_ceil(WORKGROUP as usize));
    Ok(Op::new(
        Kernel::AddInPlace,
        WORKGROUP,
        &params,
        &[&dst.t.buf, &src.t.buf],
        grid,
    ))
}

/// CPU reference.
pub fn add_ref(dst: &mut [f32], src: &[f32]) {
    dst.iter_mut().zip(src).for_each(|(d, s)| *d += s);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{gpu, random_f32};
    use crate::{GpuTensor, Readback, StepBuilder};
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 4, ..ProptestConfig::default() })]
        /// Tolerance: exact. One f32 addition is correctly rounded on both sides.
        #[test]
        fn add_matches_reference(n in 1usize..3000, off in 0usize..5, seed in any::<u64>()) {
            let Some(gpu) = gpu() else { return Ok(()) };
            let a = random_f32(n + off, seed);
            let s = random_f32(n, seed ^ 9);
            let at = GpuTensor::from_f32(gpu, &[n + off], &a);
            let st = GpuTensor::from_f32(gpu, &[n], &s);
            let mut b = StepBuilder::new();
            b.push(add_inplace(View::at(&at, off), (&st).into(), n).unwrap());
            let mut step = b.build(gpu);
            let mut y = vec![0f32; n + off];
            Readback::new(gpu, (y.len() * 4) as u64).run_and_read(gpu, &mut step, &at, 0, &mut y).unwrap();
            let mut want = a.clone();
            add_ref(&mut want[off..], &s);
            prop_assert_eq!(y, want);
        }
    }
}
