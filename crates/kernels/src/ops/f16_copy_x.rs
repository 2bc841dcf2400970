//! The f16 copy of a block of activations: each token's f32 inputs rounded to f16 and packed
//! two a word (`matmul/f16_copy_x.wgsl`). The dense route ([`super::matmul_dense`]) multiplies
//! it in place of the f32 values: its tiles then read half the bytes of X, which each of a
//! product's row tiles reads again (docs/PERF.md, D-dense-f16-x). The rounding is the one the
//! tensor-core kernels apply to f32 inputs as they stage them, so the product's inputs are
//! the same f16 values either way.

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

#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
struct F16CopyXParams {
    n_in: u32,
    n_tokens: u32,
    x_offset: u32,
    x_stride: u32,
    out_offset: u32,
    _pad: [u32; 3],
}

static SHADER: ShaderFile = shader_file!("matmul/f16_copy_x.wgsl");

const WORKGROUP: u32 = 256;

/// Uniform, X, the f16 copy.
const BINDINGS: &[BindingKind] = &[
    BindingKind::Uniform,
    BindingKind::StorageRead,
    BindingKind::StorageReadWrite,
];

/// The f16 copy of a block of activations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct F16CopyXKernel;

impl KernelFamily for F16CopyXKernel {
    fn variants() -> Vec<F16CopyXKernel> {
        vec![F16CopyXKernel]
    }

    fn program(self) -> Program {
        Program {
            name: "f16_copy_x".into(),
            files: vec![&SHADER],
            entry: "main",
            bindings: BINDINGS,
            params_size: size_of::<F16CopyXParams>(),
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

/// Words (f32 elements) of the copy of `n_tokens` rows of `n_in` inputs: two f16 a word.
pub fn f16_copy_x_len(n_tokens: usize, n_in: usize) -> usize {
    n_tokens * n_in / 2
}

/// `n_tokens` rows of `n_in` inputs of `x`, `x_stride` elements apart, rounded to f16 into
/// `out` from its offset, packed: token t's input i at half `2 out.offset + t n_in + i` (the
/// low half of a word first). One op. `n_in` must be a multiple of 8, and x's offset, the
/// stride and out's offset multiples of 4 (the kernel loads and stores 16 bytes at a time).
pub fn f16_copy_x(
    x: View<'_>,
    n_tokens: usize,
    n_in: usize,
    x_stride: usize,
    out: View<'_>,
) -> Result<Op, GpuError> {
    const OP: &str = "f16_copy_x";
    let aligned = [x.offset, x_stride, out.offset]
        .iter()
        .all(|v| v.is_multiple_of(4));
    if n_tokens == 0 || !n_in.is_multiple_of(8) || !aligned || x_stride < n_in {
        return Err(GpuError::InvalidParams {
            op: OP,
            detail: format!(
                "{n_tokens} tokens of {n_in} inputs from element {}, {x_stride} apart, into \
                 element {}: n_in must be a positive multiple of 8 and no more than the stride, \
                 the offsets and the stride multiples of 4",
                x.offset, out.offset
            ),
        });
    }
    x.check("f16_copy_x x", (n_tokens - 1) * x_stride + n_in)?;
    let len = f16_copy_x_len(n_tokens, n_in);
    out.check("f16_copy_x out", len)?;
    let end = (x.offset + (n_tokens - 1) * x_stride + n_in).max(out.offset + len);
    if u32::try_from(end).is_err() {
        return Err(GpuError::InvalidParams {
            op: OP,
            detail: format!("element {end} past what the kernel's u32 indices reach"),
        });
    }
    let params = F16CopyXParams {
        n_in: n_in as u32,
        n_tokens: n_tokens as u32,
        x_offset: x.offset as u32,
        x_stride: x_stride as u32,
        out_offset: out.offset as u32,
        _pad: [0; 3],
    };
    let grid = grid_1d((n_tokens * n_in / 8).div_ceil(WORKGROUP as usize));
    Ok(Op::new(
        F16CopyXKernel,
        WORKGROUP,
        &params,
        &[&x.t.buf, &out.t.buf],
        grid,
    ))
}
