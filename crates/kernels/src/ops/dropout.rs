//! LoRA dropout in place (PEFT's `lora_dropout` on the adapter's input): each element zeroed
//! with probability `p` and the rest scaled by `1 / (1 - p)`, the draw a hash of a seed and
//! the element's index ([`keep_factor`] is the CPU twin, bit for bit), so the backward applies
//! the forward's mask again from the same seed.
//!
//! WGSL: `elementwise/dropout.wgsl`. 256 invocations per workgroup, one element each.

use crate::error::GpuError;
use crate::kernel::KernelFamily;
use crate::op::{Op, grid_1d};
use crate::shader::{BindingKind, Program, ShaderFile, shader_file};
use crate::tensor::View;

#[cfg(any(test, feature = "parity"))]
mod parity;
#[cfg(any(test, feature = "parity"))]
pub use parity::CHECK;

/// The kernel's parameters; [`DropoutParams::set_seed`] changes the mask between submissions
/// of a built step (`Step::params` / `Step::set_params`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct DropoutParams {
    n: u32,
    offset: u32,
    seed_lo: u32,
    seed_hi: u32,
    p: f32,
    keep_scale: f32,
    _pad: [u32; 2],
}

impl DropoutParams {
    /// Draws the mask from `seed`.
    pub fn set_seed(&mut self, seed: u64) {
        self.seed_lo = seed as u32;
        self.seed_hi = (seed >> 32) as u32;
    }
}

static SHADER: ShaderFile = shader_file!("elementwise/dropout.wgsl");

const BINDINGS: &[BindingKind] = &[BindingKind::Uniform, BindingKind::StorageReadWrite];

const WORKGROUP: u32 = 256;

/// The dropout kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DropoutKernel;

impl KernelFamily for DropoutKernel {
    fn variants() -> Vec<DropoutKernel> {
        vec![DropoutKernel]
    }

    fn program(self) -> Program {
        Program {
            name: "dropout".into(),
            files: vec![&SHADER],
            entry: "main",
            bindings: BINDINGS,
            params_size: size_of::<DropoutParams>(),
        }
    }

    #[cfg(any(test, feature = "parity"))]
    fn checks() -> Vec<crate::parity::Check> {
        vec![CHECK]
    }
}

fn fmix32(mut h: u32) -> u32 {
    h ^= h >> 16;
    h = h.wrapping_mul(0x85eb_ca6b);
    h ^= h >> 13;
    h = h.wrapping_mul(0xc2b2_ae35);
    h ^= h >> 16;
    h
}

/// The factor of element `i` under the mask of `seed`: 0 with probability `p`, else
/// `keep_scale` (the kernel's `1 / (1 - p)` as an f32), as the kernel draws it.
pub fn keep_factor(seed: u64, i: u32, p: f32, keep_scale: f32) -> f32 {
    let h = fmix32(fmix32(i ^ seed as u32) ^ (seed >> 32) as u32);
    let u = (h >> 8) as f32 * (1.0 / 16_777_216.0);
    if u < p { 0.0 } else { keep_scale }
}

/// `x[..n] *= mask` in place, the mask of `seed` with drop probability `p` in `[0, 1)`.
pub fn dropout(x: View<'_>, n: usize, p: f32, seed: u64) -> Result<Op, GpuError> {
    if !(0.0..1.0).contains(&p) {
        return Err(GpuError::InvalidParams {
            op: "dropout",
            detail: format!("probability {p} outside [0, 1)"),
        });
    }
    x.check("dropout x", n)?;
    let mut params = DropoutParams {
        n: n as u32,
        offset: x.offset as u32,
        seed_lo: 0,
        seed_hi: 0,
        p,
        keep_scale: 1.0 / (1.0 - p),
        _pad: [0; 2],
    };
    params.set_seed(seed);
    let grid = grid_1d(n.div_ceil(WORKGROUP as usize));
    Ok(Op::new(
        DropoutKernel,
        WORKGROUP,
        &params,
        &[&x.t.buf],
        grid,
    ))
}
