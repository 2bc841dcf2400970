//! Gated linear units: `out = act(gate) * up` with GELU (tanh form, GEGLU) or SiLU (SwiGLU).
//!
//! WGSL: `elementwise/glu.wgsl` + `elementwise/act.wgsl` (the activations, chosen by the `ACT`
//! override, part of the pipeline key; shared with the matvec's GLU input,
//! [`crate::ops::matvec::matvec_glu`]). 256 invocations per workgroup, one element each.

use crate::device::Gpu;
use crate::error::GpuError;
use crate::kernel::KernelFamily;
use crate::op::{Op, grid_1d};
use crate::parity::data::{Rng, random_f32};
use crate::parity::{Check, Compare, run_read};
use crate::shader::{BindingKind, Program, ShaderFile, shader_file};
use crate::tensor::{Dtype, GpuTensor, View};

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
/// The activations (`act(x)`, `ACT` override), for every kernel that applies one.
pub(crate) static ACT: ShaderFile = shader_file!("elementwise/act.wgsl");

const BINDINGS: &[BindingKind] = &[
    BindingKind::Uniform,
    BindingKind::StorageRead,
    BindingKind::StorageRead,
    BindingKind::StorageReadWrite,
];

pub const WORKGROUP: u32 = 256;

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

    #[cfg(any(test, feature = "parity"))]
    fn checks() -> Vec<Check> {
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

/// CPU reference.
pub fn glu_ref(act: Activation, gate: &[f32], up: &[f32]) -> Vec<f32> {
    gate.iter()
        .zip(up)
        .map(|(&g, &u)| (act.apply(f64::from(g)) * f64::from(u)) as f32)
        .collect()
}

/// The bound on one output of the GLU: 2^-16 * (|g| + 1) * |up| (see [`CHECK`]).
pub fn tolerance(gate: f32, up: f32) -> f64 {
    f64::from(gate.abs() + 1.0) * f64::from(up.abs()) / 65536.0
}

/// Tolerance: |gpu - ref| <= 2^-16 * (|g| + 1) * |up|. WGSL leaves tanh's and exp's
/// accuracy to the platform (Vulkan: exp within 3 + 2|x| ulp, tanh inherited from
/// sinh/cosh), so only a few-ulp relative bound holds on the activation; scaled by
/// (|g| + 1) because the activation is ~|g| for large gates and ~0.5 near zero.
pub const CHECK: Check = Check {
    name: "glu",
    tolerance: "2^-16*(|g|+1)*|up|",
    case: parity_case,
};

fn parity_case(gpu: &Gpu, rng: &mut Rng) -> Result<Compare, GpuError> {
    let act = if rng.bool() {
        Activation::GeluTanh
    } else {
        Activation::Silu
    };
    compare(gpu, act, rng.range(1, 3000), rng.next_u64())
}

fn compare(gpu: &Gpu, act: Activation, n: usize, seed: u64) -> Result<Compare, GpuError> {
    // Gate|up fused in one tensor, as the fused matvec writes them; gates span [-8, 8].
    let mut gu = random_f32(2 * n, seed);
    gu[..n].iter_mut().for_each(|g| *g *= 8.0);
    let gut = GpuTensor::from_f32(gpu, &[2 * n], &gu);
    let out = GpuTensor::zeros(gpu, &[n], Dtype::F32);
    let op = glu(act, (&gut).into(), View::at(&gut, n), (&out).into(), n)?;
    let y: Vec<f32> = run_read(gpu, vec![op], &out, 0, n)?;
    let want = glu_ref(act, &gu[..n], &gu[n..]);
    let mut c = Compare::default();
    for i in 0..n {
        c.add(
            f64::from(y[i]),
            f64::from(want[i]),
            tolerance(gu[i], gu[n + i]),
            || format!("{act:?} {i}: gate {}", gu[i]),
        );
    }
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil;

    #[test]
    fn glu_matches_reference() {
        testutil::parity("glu", 4, 41);
    }

    #[test]
    fn both_activations() {
        let Some(gpu) = testutil::gpu() else { return };
        for (act, n) in [(Activation::GeluTanh, 2048), (Activation::Silu, 1536)] {
            let c = compare(gpu, act, n, n as u64).unwrap();
            assert!(c.max_ratio <= 1.0, "{}", c.worst);
        }
    }
}
