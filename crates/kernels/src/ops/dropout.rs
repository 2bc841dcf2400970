//! LoRA dropout (PEFT's `lora_dropout` on the adapter's input): each element zeroed with
//! probability `p` and the rest scaled by `1 / (1 - p)`, the draw a hash of a seed and the
//! element's index ([`keep_factor`] is the CPU twin, bit for bit), so the backward applies the
//! forward's mask again from the same seed. In place (the backward's gradient) or out of place
//! (the forward's masked copy of an input other ops read unmasked: one dispatch, not a copy
//! and a mask).
//!
//! WGSL: `elementwise/dropout_mask.wgsl` (the mask) with `elementwise/dropout.wgsl` (in place)
//! or `elementwise/dropout_out.wgsl`. 256 invocations per workgroup, one element each.

use crate::error::GpuError;
use crate::kernel::KernelFamily;
use crate::op::{Op, grid_1d};
use crate::pipeline::PipelineKey;
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
    /// The output's offset (out of place only).
    y_offset: u32,
    _pad: u32,
}

impl DropoutParams {
    /// Draws the mask from `seed`.
    pub fn set_seed(&mut self, seed: u64) {
        self.seed_lo = seed as u32;
        self.seed_hi = (seed >> 32) as u32;
    }
}

static MASK: ShaderFile = shader_file!("elementwise/dropout_mask.wgsl");
static IN_PLACE: ShaderFile = shader_file!("elementwise/dropout.wgsl");
static OUT: ShaderFile = shader_file!("elementwise/dropout_out.wgsl");

const BINDINGS: &[BindingKind] = &[BindingKind::Uniform, BindingKind::StorageReadWrite];
const OUT_BINDINGS: &[BindingKind] = &[
    BindingKind::Uniform,
    BindingKind::StorageRead,
    BindingKind::StorageReadWrite,
];

const WORKGROUP: u32 = 256;

/// The dropout kernel, in place or not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DropoutKernel {
    /// `y = x ⊙ mask` into another tensor (else `x ⊙= mask`).
    pub out_of_place: bool,
}

impl KernelFamily for DropoutKernel {
    fn variants() -> Vec<DropoutKernel> {
        [false, true]
            .map(|out_of_place| DropoutKernel { out_of_place })
            .to_vec()
    }

    fn program(self) -> Program {
        let (name, main, bindings) = match self.out_of_place {
            false => ("dropout", &IN_PLACE, BINDINGS),
            true => ("dropout_out", &OUT, OUT_BINDINGS),
        };
        Program {
            name: name.into(),
            files: vec![&MASK, main],
            entry: "main",
            bindings,
            params_size: size_of::<DropoutParams>(),
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
    dropout_op(x, None, n, p, seed)
}

/// `y[..n] = x[..n] * mask`, the mask as [`dropout`]'s; `y` must be another tensor than `x`.
pub fn dropout_out(x: View<'_>, y: View<'_>, n: usize, p: f32, seed: u64) -> Result<Op, GpuError> {
    dropout_op(x, Some(y), n, p, seed)
}

fn dropout_op(
    x: View<'_>,
    y: Option<View<'_>>,
    n: usize,
    p: f32,
    seed: u64,
) -> Result<Op, GpuError> {
    if !(0.0..1.0).contains(&p) {
        return Err(GpuError::InvalidParams {
            op: "dropout",
            detail: format!("probability {p} outside [0, 1)"),
        });
    }
    x.check("dropout x", n)?;
    if let Some(y) = y {
        y.check("dropout y", n)?;
    }
    let mut params = DropoutParams {
        n: n as u32,
        offset: x.offset as u32,
        seed_lo: 0,
        seed_hi: 0,
        p,
        keep_scale: 1.0 / (1.0 - p),
        y_offset: y.map_or(0, |y| y.offset as u32),
        _pad: 0,
    };
    params.set_seed(seed);
    let grid = grid_1d(n.div_ceil(WORKGROUP as usize));
    let kernel = DropoutKernel {
        out_of_place: y.is_some(),
    };
    match y {
        None => Ok(Op::new(kernel, WORKGROUP, &params, &[&x.t.buf], grid)),
        Some(y) => Ok(Op::new(
            kernel,
            WORKGROUP,
            &params,
            &[&x.t.buf, &y.t.buf],
            grid,
        )),
    }
}
