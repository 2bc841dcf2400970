//! The f16 copy's CPU reference and parity check.

use half::f16;

use super::*;
use crate::device::Gpu;
use crate::ops::matmul_coop::f16_err;
use crate::parity::data::{Rng, random_weight};
use crate::parity::{Check, Compare, U, run_read};
use crate::tensor::{Dtype, GpuTensor, GpuWeight, WeightShape};

/// The kernel decodes in f32 as the quant crate does, give or take a few roundings (matvec's
/// `4u |w|`, doubled), then rounds to f16 in a direction WGSL leaves to the device, flushing
/// subnormals where Vulkan allows: `f16_err(|w|) + 8u |w|` (matmul_coop's bound on a weight).
pub const CHECK: Check = Check {
    name: "f16_copy",
    tolerance: "f16 rounding (1 ulp; subnormals may flush)+8*2^-24*|w|",
    case: parity_case,
};

/// The dequantized rows `first..first + n` of a weight (`values`, row-major, `n_in` a row),
/// each rounded to the nearest f16.
pub fn f16_copy_ref(values: &[f32], n_in: usize, first: usize, n: usize) -> Vec<f32> {
    values[first * n_in..(first + n) * n_in]
        .iter()
        .map(|&v| f16::from_f32(v).to_f32())
        .collect()
}

fn parity_case(gpu: &Gpu, rng: &mut Rng) -> Result<Compare, GpuError> {
    let f = rng.pick(&GpuFormat::ALL);
    let n_in = rng.range(1, 3) * f.block_weights().max(32);
    let n_out = rng.range(1, 40);
    let chunk_rows = rng.range(1, 40);
    let first = rng.range(0, n_out);
    let n = rng.range(1, n_out - first + 1);
    let pad = 4 * rng.range(0, 3);
    compare(
        gpu,
        f,
        (n_in, n_out, chunk_rows),
        first..first + n,
        pad,
        rng.next_u64(),
    )
}

/// Copies rows `range` of a random `n_out x n_in` weight in `f` (uploaded in chunks of
/// `chunk_rows`) into a scratch at word `pad` (a multiple of 4), against [`f16_copy_ref`].
fn compare(
    gpu: &Gpu,
    f: GpuFormat,
    (n_in, n_out, chunk_rows): (usize, usize, usize),
    range: std::ops::Range<usize>,
    pad: usize,
    seed: u64,
) -> Result<Compare, GpuError> {
    let (bytes, values) = random_weight(f, n_out, n_in, seed);
    let shape = WeightShape {
        format: f,
        n_in,
        n_out,
    };
    let w = GpuWeight::upload_chunked(gpu, shape, &bytes, chunk_rows)?;
    let rows = w.rows(range.clone());
    let len = f16_copy_len(rows);
    let out = GpuTensor::zeros(gpu, &[pad + len], Dtype::F32);
    let ops = f16_copy(rows, View::at(&out, pad))?;
    let words: Vec<u32> = run_read(gpu, ops, &out, pad, len)?;
    let want = f16_copy_ref(&values, n_in, range.start, range.len());
    let mut c = Compare::default();
    let got = words
        .iter()
        .flat_map(|&w| [w as u16, (w >> 16) as u16])
        .map(|h| f16::from_bits(h).to_f32());
    for (i, (g, r)) in got.zip(&want).enumerate() {
        let v = f64::from(values[range.start * n_in + i]).abs();
        let tol = f16_err(v) + 8.0 * U * v;
        c.add(f64::from(g), f64::from(*r), tol, || {
            format!("{f:?} {n_out}x{n_in} rows {range:?} elem {i}")
        });
    }
    Ok(c)
}

/// The transposed copy ([`f16_copy_transposed`]): the same rounding of each weight as
/// [`CHECK`], each at its transposed place.
pub const CHECK_TRANSPOSED: Check = Check {
    name: "f16_copy_t",
    tolerance: "f16 rounding (1 ulp; subnormals may flush)+8*2^-24*|w|",
    case: transposed_case,
};

fn transposed_case(gpu: &Gpu, rng: &mut Rng) -> Result<Compare, GpuError> {
    let f = rng.pick(&GpuFormat::ALL);
    let n_in = rng.range(1, 3) * f.block_weights().max(32);
    let n_out = 2 * rng.range(1, 40);
    let chunk_rows = 2 * rng.range(1, 20);
    let pad = 2 * rng.range(0, 3);
    let (bytes, values) = random_weight(f, n_out, n_in, rng.next_u64());
    let shape = WeightShape {
        format: f,
        n_in,
        n_out,
    };
    let w = GpuWeight::upload_chunked(gpu, shape, &bytes, chunk_rows)?;
    let len = f16_copy_len(w.all_rows());
    let out = GpuTensor::zeros(gpu, &[pad + len], Dtype::F32);
    let ops = f16_copy_transposed(&w, View::at(&out, pad))?;
    let words: Vec<u32> = run_read(gpu, ops, &out, pad, len)?;
    let want = f16_copy_ref(&values, n_in, 0, n_out);
    let mut c = Compare::default();
    let got: Vec<f32> = words
        .iter()
        .flat_map(|&w| [w as u16, (w >> 16) as u16])
        .map(|h| f16::from_bits(h).to_f32())
        .collect();
    for row in 0..n_out {
        for i in 0..n_in {
            let v = f64::from(values[row * n_in + i]).abs();
            let tol = f16_err(v) + 8.0 * U * v;
            c.add(
                f64::from(got[i * n_out + row]),
                f64::from(want[row * n_in + i]),
                tol,
                || format!("{f:?} {n_out}x{n_in} (chunks of {chunk_rows}) row {row} input {i}"),
            );
        }
    }
    Ok(c)
}

#[cfg(test)]
mod tests {
    use crate::testutil;

    #[test]
    fn f16_copy_matches_reference() {
        testutil::parity("f16_copy", 8, 71);
    }

    #[test]
    fn f16_copy_transposed_matches_reference() {
        testutil::parity("f16_copy_t", 8, 72);
    }
}
