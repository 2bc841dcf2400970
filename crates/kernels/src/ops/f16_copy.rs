//! The f16 copy of a weight: its rows in any format decoded (the format file's
//! `decode_half`, as the tensor-core matmul stages them) and rounded to f16 into a scratch in
//! the layout of an F16 weight (`matmul/f16_copy.wgsl`). A long prompt block multiplies the
//! scratch on the dense tensor-core kernel ([`super::matmul_dense`]) with its larger tiles,
//! decoding each weight once per block rather than once per token tile.

use crate::error::GpuError;
use crate::format::GpuFormat;
use crate::kernel::KernelFamily;
use crate::op::{Op, grid_1d};
use crate::shader::{BLOCKS, BindingKind, Program, ShaderFile, shader_file};
use crate::tensor::{View, WeightRows};

#[cfg(any(test, feature = "parity"))]
mod parity;
#[cfg(any(test, feature = "parity"))]
pub use parity::{CHECK, f16_copy_ref};

#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
struct F16CopyParams {
    n_in: u32,
    row_bytes: u32,
    first_row: u32,
    n_rows: u32,
    out_offset: u32,
    _pad: [u32; 3],
}

static SHADER: ShaderFile = shader_file!("matmul/f16_copy.wgsl");

const WORKGROUP: u32 = 256;

/// Uniform, the weight chunk, the f16 scratch, the weight chunk as words.
const BINDINGS: &[BindingKind] = &[
    BindingKind::Uniform,
    BindingKind::StorageRead,
    BindingKind::StorageReadWrite,
    BindingKind::StorageRead,
];

/// The f16 copy of a weight of one format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct F16CopyKernel(pub GpuFormat);

impl KernelFamily for F16CopyKernel {
    fn variants() -> Vec<F16CopyKernel> {
        crate::shader::weight_formats()
            .iter()
            .map(|&f| F16CopyKernel(f))
            .collect()
    }

    fn program(self) -> Program {
        let f = self.0;
        Program {
            name: format!("f16_copy_{}", f.name()),
            files: [&SHADER, &BLOCKS]
                .into_iter()
                .chain(f.decoder().iter().copied())
                .collect(),
            entry: "main",
            bindings: BINDINGS,
            params_size: size_of::<F16CopyParams>(),
        }
    }

    #[cfg(any(test, feature = "parity"))]
    fn checks() -> Vec<crate::parity::Check> {
        vec![CHECK]
    }
}

/// Words (f32 elements) of the scratch the f16 copy of rows `rows` takes: two f16 a word.
pub fn f16_copy_len(rows: WeightRows<'_>) -> usize {
    rows.n * rows.w.shape.n_in / 2
}

/// Rows `rows` of a weight, decoded and rounded to f16, into `out` from its offset: row
/// `rows.first + r` at word `r * n_in / 2`, the bytes of an F16 weight of `rows.n` rows. One
/// op per weight chunk the rows touch. `n_in` must be a multiple of 32 and `out.offset` of 4
/// (the kernel stores 16 bytes at a time).
pub fn f16_copy(rows: WeightRows<'_>, out: View<'_>) -> Result<Vec<Op>, GpuError> {
    const OP: &str = "f16_copy";
    rows.check(OP)?;
    let s = rows.w.shape;
    if !s.n_in.is_multiple_of(32) {
        return Err(GpuError::InvalidParams {
            op: OP,
            detail: format!("{} inputs a row, not whole units of 32", s.n_in),
        });
    }
    out.check("f16_copy out", f16_copy_len(rows))?;
    if !out.offset.is_multiple_of(4) {
        return Err(GpuError::InvalidParams {
            op: OP,
            detail: format!("out from element {}, not a 16-byte boundary", out.offset),
        });
    }
    let end = rows.first + rows.n;
    let words_per_row = s.n_in / 2;
    let ops = rows
        .w
        .chunks
        .iter()
        .filter(|c| c.first_row < end && rows.first < c.first_row + c.n_rows)
        .map(|c| {
            let first = rows.first.max(c.first_row);
            let n_rows = end.min(c.first_row + c.n_rows) - first;
            let params = F16CopyParams {
                n_in: s.n_in as u32,
                row_bytes: s.format.row_bytes(s.n_in) as u32,
                first_row: (first - c.first_row) as u32,
                n_rows: n_rows as u32,
                out_offset: ((out.offset + (first - rows.first) * words_per_row) / 4) as u32,
                _pad: [0; 3],
            };
            let halves = n_rows * (s.n_in / 16);
            let grid = grid_1d(halves.div_ceil(WORKGROUP as usize));
            Op::new(
                F16CopyKernel(s.format),
                WORKGROUP,
                &params,
                &[&c.buf, &out.t.buf, &c.buf],
                grid,
            )
        });
    Ok(ops.collect())
}
