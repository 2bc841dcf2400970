//! The f16 copy of a weight: its rows in any format decoded (the format file's
//! `decode_half`, as the tensor-core matmul stages them) and rounded to f16 into a scratch in
//! the layout of an F16 weight (`matmul/f16_copy.wgsl`). A long prompt block multiplies the
//! scratch on the dense tensor-core kernel ([`super::matmul_dense`]) with its larger tiles,
//! decoding each weight once per block rather than once per token tile.

use crate::error::GpuError;
use crate::format::GpuFormat;
use crate::kernel::KernelFamily;
use crate::op::{Op, grid_1d};
use crate::pipeline::PipelineKey;
use crate::shader::{BLOCKS, BindingKind, Program, ShaderFile, shader_file};
use crate::tensor::{GpuWeight, View, WeightRows};

#[cfg(any(test, feature = "parity"))]
mod parity;
#[cfg(any(test, feature = "parity"))]
pub use parity::{CHECK, CHECK_TRANSPOSED, f16_copy_ref};

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
static TRANSPOSED: ShaderFile = shader_file!("matmul/f16_copy_t.wgsl");

const WORKGROUP: u32 = 256;

/// Uniform, the weight chunk, the f16 scratch, the weight chunk as words.
const BINDINGS: &[BindingKind] = &[
    BindingKind::Uniform,
    BindingKind::StorageRead,
    BindingKind::StorageReadWrite,
    BindingKind::StorageRead,
];

/// The f16 copy of a weight of one format, as stored (`false`) or transposed (`true`,
/// [`f16_copy_transposed`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct F16CopyKernel(pub GpuFormat, pub bool);

impl KernelFamily for F16CopyKernel {
    fn variants() -> Vec<F16CopyKernel> {
        let formats = crate::shader::weight_formats();
        [false, true]
            .into_iter()
            .flat_map(|t| formats.iter().map(move |&f| F16CopyKernel(f, t)))
            .collect()
    }

    fn program(self) -> Program {
        let F16CopyKernel(f, transposed) = self;
        let (name, shader) = match transposed {
            false => (format!("f16_copy_{}", f.name()), &SHADER),
            true => (format!("f16_copy_t_{}", f.name()), &TRANSPOSED),
        };
        Program {
            name,
            files: [shader, &BLOCKS]
                .into_iter()
                .chain(f.decoder().iter().copied())
                .collect(),
            entry: "main",
            bindings: BINDINGS,
            params_size: size_of::<F16CopyParams>(),
        }
    }

    fn pipeline_keys(self) -> Vec<PipelineKey> {
        vec![PipelineKey::new(self, WORKGROUP)]
    }

    #[cfg(any(test, feature = "parity"))]
    fn checks() -> Vec<crate::parity::Check> {
        vec![CHECK, CHECK_TRANSPOSED]
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
                F16CopyKernel(s.format, false),
                WORKGROUP,
                &params,
                &[&c.buf, &out.t.buf, &c.buf],
                grid,
            )
        });
    Ok(ops.collect())
}

/// Whether [`f16_copy_transposed`]'s layout can hold `w` (inputs in whole units of 32, rows
/// in pairs, every chunk's too), else the error naming what it cannot: what a caller asks before
/// choosing the transposed copy.
pub fn check_transposable(w: &GpuWeight) -> Result<(), GpuError> {
    let s = w.shape;
    let invalid = |detail: String| GpuError::InvalidParams {
        op: "f16_copy_t",
        detail,
    };
    if !s.n_in.is_multiple_of(32) {
        return Err(invalid(format!(
            "{} inputs a row, not whole units of 32",
            s.n_in
        )));
    }
    if !s.n_out.is_multiple_of(2) || w.chunks.iter().any(|c| !c.n_rows.is_multiple_of(2)) {
        return Err(invalid(format!("{} rows or a chunk's rows odd", s.n_out)));
    }
    Ok(())
}

/// A whole weight `w` decoded and rounded to f16 into `out` from its offset, transposed: the
/// layout of an F16 weight of `n_in` rows of `n_out` inputs (`W^T`), element (row, i) at half
/// `i * n_out + row` ([`f16_copy_len`] words). One op per chunk. `n_in` must be a multiple of
/// 32, `n_out` and every chunk's rows even (a word holds two rows' values), `out.offset` even.
pub fn f16_copy_transposed(w: &GpuWeight, out: View<'_>) -> Result<Vec<Op>, GpuError> {
    const OP: &str = "f16_copy_t";
    let s = w.shape;
    let invalid = |detail: String| GpuError::InvalidParams { op: OP, detail };
    check_transposable(w)?;
    out.check("f16_copy_t out", f16_copy_len(w.all_rows()))?;
    if !out.offset.is_multiple_of(2) || u32::try_from(out.offset + s.n_out * s.n_in / 2).is_err() {
        return Err(invalid(format!("out from element {}", out.offset)));
    }
    let ops = w.chunks.iter().map(|c| {
        let params = F16CopyTParams {
            n_in: s.n_in as u32,
            row_bytes: s.format.row_bytes(s.n_in) as u32,
            first_row: 0,
            n_pairs: (c.n_rows / 2) as u32,
            out_offset: (out.offset + c.first_row / 2) as u32,
            out_stride: (s.n_out / 2) as u32,
            _pad: [0; 2],
        };
        let invocations = c.n_rows / 2 * (s.n_in / 16);
        let grid = grid_1d(invocations.div_ceil(WORKGROUP as usize));
        Op::new(
            F16CopyKernel(s.format, true),
            WORKGROUP,
            &params,
            &[&c.buf, &out.t.buf, &c.buf],
            grid,
        )
    });
    Ok(ops.collect())
}

#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
struct F16CopyTParams {
    n_in: u32,
    row_bytes: u32,
    first_row: u32,
    n_pairs: u32,
    out_offset: u32,
    out_stride: u32,
    _pad: [u32; 2],
}
