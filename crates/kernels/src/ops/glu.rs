//! Gated linear units: `out = act(gate) * up` with GELU (tanh form, GEGLU) or SiLU (SwiGLU).
//!
//! WGSL: `elementwise/glu.wgsl`, activation chosen by the `ACT` override (part of the
//! pipeline key). 256 invocations per workgroup, one element each.

use crate::error::GpuError;
use crate::op::{Op, grid_1d};
use crate::pipeline::Kernel;
use crate::shader::{BindingKind, Program, ShaderFile, shader_file};
use crate::tensor::View;

/// The gate's activation.
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

    /// CPU reference, in f64.
    pub fn apply(self, x: f64) -> f64 {
        match self {
            Activation::GeluTanh => {
                let c = (2.0 / std::f64::consts::PI).sqrt();
                0.5 * x * (1.0 + (c * (x + 0.044715 * x * x * x)).tanh())
            }
            Activation::Silu => x / (1.0 + (-x).exp()),
        }
    }
}

#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct GluParams {
    pub n: u32,
    pub gate_offset: u32,
    pub up_offset: u32,
    pub out_offset: u32,
}

static SHADER: ShaderFile = shader_file!("elementwise/glu.wgsl");

const BINDINGS: &[BindingKind] = &[
    BindingKind::Uniform,
    BindingKind::StorageRead,
    BindingKind::StorageRead,
    BindingKind::StorageReadWrite,
];

pub const WORKGROUP: u32 = 256;

pub(crate) fn program() -> Program {
    Program {
        name: "glu".to_string(),
        files: vec![&SHADER],
        entry: "main",
        bindings: BINDINGS,
        params_size: size_of::<GluParams>(),
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
    Ok(Op::new(
        Kernel::Glu(act),
        WORKGROUP,
        &params,
        &buffers,
        grid,
    ))
}

/// CPU reference.
pub fn glu_ref(act: Activation, gate: &[f32], up: &[f32]) -> Vec<f32> {
    gate.iter()
        .zip(up)
        .map(|(&g, &u)| (act.apply(f64::from(g)) * f64::from(u)) as f32)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{gpu, random_f32};
    use crate::{Dtype, GpuTensor, Readback, StepBuilder};
    use proptest::prelude::*;

    /// Tolerance: |gpu - ref| <= 2^-16 * (|g| + 1) * |up|. WGSL leaves tanh's and exp's
    /// accuracy to the platform (Vulkan: exp within 3 + 2|x| ulp, tanh inherited from
    /// sinh/cosh), so only a few-ulp relative bound holds on the activation; scaled by
    /// (|g| + 1) because the activation is ~|g| for large gates and ~0.5 near zero.
    fn check(act: Activation, n: usize, seed: u64) {
        let Some(gpu) = gpu() else { return };
        // Gate|up fused in one tensor, as the fused matvec writes them; gates span [-8, 8].
        let mut gu = random_f32(2 * n, seed);
        gu[..n].iter_mut().for_each(|g| *g *= 8.0);
        let gut = GpuTensor::from_f32(gpu, &[2 * n], &gu);
        let out = GpuTensor::zeros(gpu, &[n], Dtype::F32);
        let mut b = StepBuilder::new();
        b.push(glu(act, (&gut).into(), View::at(&gut, n), (&out).into(), n).unwrap());
        let mut step = b.build(gpu);
        let mut y = vec![0f32; n];
        Readback::new(gpu, (n * 4) as u64)
            .run_and_read(gpu, &mut step, &out, 0, &mut y)
            .unwrap();
        let want = glu_ref(act, &gu[..n], &gu[n..]);
        for i in 0..n {
            let tol = (gu[i].abs() + 1.0) * gu[n + i].abs() / 65536.0;
            assert!(
                (y[i] - want[i]).abs() <= tol,
                "{act:?} {i}: gate {} gpu {} ref {}",
                gu[i],
                y[i],
                want[i]
            );
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 4, ..ProptestConfig::default() })]
        #[test]
        fn glu_matches_reference(gelu in any::<bool>(), n in 1usize..3000, seed in any::<u64>()) {
            check(if gelu { Activation::GeluTanh } else { Activation::Silu }, n, seed);
        }
    }

    #[test]
    fn both_activations() {
        check(Activation::GeluTanh, 2048, 1);
        check(Activation::Silu, 1536, 2);
    }
}
