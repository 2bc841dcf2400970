//! `Y = X W^T` for a block of tokens (prefill), `W` a GGUF weight in any [`GpuFormat`].
//!
//! WGSL: `matmul/matmul.wgsl` + `common/blocks.wgsl` + `formats/<type>.wgsl` (the format's
//! `decode_half`). A workgroup of 128 computes 64 rows x 64 tokens: per unit of 32 inputs
//! every invocation decodes 16 weights and loads 16 inputs into workgroup memory, then
//! accumulates 8 rows x 4 tokens in registers, so a decoded weight serves 64 tokens and an
//! input 64 rows. One dispatch per weight chunk.

use crate::device::Gpu;
use crate::error::GpuError;
use crate::format::GpuFormat;
use crate::op::Op;
use crate::ops::matvec::matvec_ref;
use crate::parity::data::{Rng, n_in_step, random_f32, random_weight};
use crate::parity::{Check, Compare, U, run_read};
use crate::pipeline::Kernel;
use crate::shader::{BLOCKS, Program, ShaderFile, WEIGHT_KERNEL_BINDINGS, shader_file};
use crate::tensor::{Dtype, GpuTensor, GpuWeight, View, WeightShape};

#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct MatmulParams {
    pub n_in: u32,
    /// Rows in this chunk.
    pub n_rows: u32,
    pub row_bytes: u32,
    pub n_tokens: u32,
    pub x_offset: u32,
    pub x_stride: u32,
    /// Where this chunk's first row of token 0 lands in `y`.
    pub y_offset: u32,
    pub y_stride: u32,
}

static SHADER: ShaderFile = shader_file!("matmul/matmul.wgsl");

/// Fixed by the kernel: 8 x 16 invocations of 8 rows x 4 tokens each.
pub const WORKGROUP: u32 = 128;
const TILE_ROWS: usize = 64;
const TILE_TOKENS: usize = 64;

pub(crate) fn program(f: GpuFormat) -> Program {
    Program {
        name: format!("matmul_{}", f.name()),
        files: [&SHADER, &BLOCKS]
            .into_iter()
            .chain(f.decoder().iter().copied())
            .collect(),
        entry: "main",
        bindings: WEIGHT_KERNEL_BINDINGS,
        params_size: size_of::<MatmulParams>(),
    }
}

/// Strides of the token rows of X and Y (elements); `None`: packed (`n_in`, `n_out`).
#[derive(Debug, Clone, Copy, Default)]
pub struct Strides {
    pub x: Option<usize>,
    pub y: Option<usize>,
}

/// `y[y.offset + t * y_stride + r] = sum_i W[r, i] x[x.offset + t * x_stride + i]` for
/// `n_tokens` tokens; one op per weight chunk.
pub fn matmul(
    w: &GpuWeight,
    x: View<'_>,
    y: View<'_>,
    n_tokens: usize,
    strides: Strides,
) -> Result<Vec<Op>, GpuError> {
    let s = w.shape;
    let xs = strides.x.unwrap_or(s.n_in);
    let ys = strides.y.unwrap_or(s.n_out);
    let n = n_tokens.max(1);
    x.check("matmul x", (n - 1) * xs + s.n_in)?;
    y.check("matmul y", (n - 1) * ys + s.n_out)?;
    let ops = w.chunks.iter().map(|c| {
        let params = MatmulParams {
            n_in: s.n_in as u32,
            n_rows: c.n_rows as u32,
            row_bytes: s.format.row_bytes(s.n_in) as u32,
            n_tokens: n_tokens as u32,
            x_offset: x.offset as u32,
            x_stride: xs as u32,
            y_offset: (y.offset + c.first_row) as u32,
            y_stride: ys as u32,
        };
        let grid = [
            c.n_rows.div_ceil(TILE_ROWS) as u32,
            n_tokens.div_ceil(TILE_TOKENS) as u32,
            1,
        ];
        Op::new(
            Kernel::Matmul(s.format),
            WORKGROUP,
            &params,
            &[&c.buf, &x.t.buf, &y.t.buf, &c.buf],
            grid,
        )
    });
    Ok(ops.collect())
}

/// Tolerance: as matvec, per output: (n_in + 4) * 2^-24 * sum_i |w_i x_i| (the GPU sums the
/// n_in products of each output in unit order with FMA or not; any order of n f32 additions
/// errs by at most n * u * sum |terms|; decoding adds a few roundings). Reference: f64.
pub const CHECK: Check = Check {
    name: "matmul",
    tolerance: "(n_in+4)*2^-24*sum|w_i x_i|",
    case: parity_case,
};

fn parity_case(gpu: &Gpu, rng: &mut Rng) -> Result<Compare, GpuError> {
    let format = rng.pick(&GpuFormat::ALL);
    let n_out = rng.range(1, 150);
    let n_blocks = rng.range(1, 4);
    let n_tokens = rng.range(1, 70);
    let chunk_rows = rng.range(1, 200);
    compare(
        gpu,
        format,
        n_out,
        n_blocks,
        n_tokens,
        chunk_rows,
        rng.next_u64(),
    )
}

fn compare(
    gpu: &Gpu,
    format: GpuFormat,
    n_out: usize,
    n_blocks: usize,
    n_tokens: usize,
    chunk_rows: usize,
    seed: u64,
) -> Result<Compare, GpuError> {
    let n_in = n_blocks * n_in_step(format);
    let (bytes, w) = random_weight(format, n_out, n_in, seed);
    // X rows padded by 3, Y rows by 2: strided views.
    let (xs, ys) = (n_in + 3, n_out + 2);
    let x = random_f32(n_tokens * xs, seed ^ 1);
    let shape = WeightShape {
        format,
        n_in,
        n_out,
    };
    let wt = GpuWeight::upload_chunked(gpu, shape, &bytes, chunk_rows)?;
    let xt = GpuTensor::from_f32(gpu, &[x.len()], &x);
    let yt = GpuTensor::zeros(gpu, &[n_tokens * ys + 1], Dtype::F32);
    let strides = Strides {
        x: Some(xs),
        y: Some(ys),
    };
    let ops = matmul(&wt, View::at(&xt, 0), View::at(&yt, 1), n_tokens, strides)?;
    let y: Vec<f32> = run_read(gpu, ops, &yt, 1, n_tokens * ys)?;
    let mut c = Compare::default();
    for t in 0..n_tokens {
        let (want, abs) = matvec_ref(&w, &x[t * xs..][..n_in]);
        for r in 0..n_out {
            let bound = (n_in + 4) as f64 * U * f64::from(abs[r]);
            c.add(f64::from(y[t * ys + r]), f64::from(want[r]), bound, || {
                format!("{format:?} {n_tokens}x{n_in} -> {n_out}: token {t} row {r}")
            });
        }
        if t + 1 < n_tokens {
            // The padding between Y rows stays untouched.
            c.exact(f64::from(y[t * ys + n_out]), 0.0, || {
                format!("pad after token {t}")
            });
        }
    }
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil;

    #[test]
    fn matmul_matches_reference() {
        testutil::parity("matmul", 8, 101);
    }

    /// Every format on an odd shape spanning several row and token tiles and 2 chunks.
    #[test]
    fn every_format_odd_shape() {
        let Some(gpu) = testutil::gpu() else { return };
        for (i, f) in GpuFormat::ALL.into_iter().enumerate() {
            let c = compare(gpu, f, 131, 2, 37, 100, 200 + i as u64).unwrap();
            assert!(c.max_ratio <= 1.0, "{}", c.worst);
        }
    }
}
