//! The activations' f16 copy: its CPU reference and parity check.

use half::f16;

use super::*;
use crate::device::Gpu;
use crate::ops::matmul_coop::f16_err;
use crate::parity::data::{Rng, random_f32};
use crate::parity::{Check, Compare, run_read};
use crate::tensor::{Dtype, GpuTensor};

/// Each input rounded to f16, in a direction WGSL leaves to the device, subnormals flushed
/// where Vulkan allows: `f16_err(|x|)` (the bound the tensor-core kernels' checks give an
/// input they round).
pub const CHECK: Check = Check {
    name: "f16_copy_x",
    tolerance: "f16 rounding (1 ulp; subnormals may flush)",
    case: parity_case,
};

fn parity_case(gpu: &Gpu, rng: &mut Rng) -> Result<Compare, GpuError> {
    let n_in = 8 * rng.range(1, 40);
    let n_tokens = rng.range(1, 20);
    let x_stride = n_in + 4 * rng.range(0, 3);
    let x_offset = 4 * rng.range(0, 3);
    let out_offset = 4 * rng.range(0, 3);
    let len = x_offset + (n_tokens - 1) * x_stride + n_in;
    let mut values = random_f32(len, rng.next_u64());
    // Magnitudes across f16's range, its subnormals included.
    for (i, v) in values.iter_mut().enumerate() {
        *v *= [1.0, 1e-5, 1e-7, 3e4][i % 4];
    }
    let x = GpuTensor::from_f32(gpu, &[len], &values);
    let n = f16_copy_x_len(n_tokens, n_in);
    let out = GpuTensor::zeros(gpu, &[out_offset + n], Dtype::F32);
    let op = f16_copy_x(
        View::at(&x, x_offset),
        n_tokens,
        n_in,
        x_stride,
        View::at(&out, out_offset),
    )?;
    let words: Vec<u32> = run_read(gpu, vec![op], &out, out_offset, n)?;
    let got = words
        .iter()
        .flat_map(|&w| [w as u16, (w >> 16) as u16])
        .map(|h| f16::from_bits(h).to_f32());
    let mut c = Compare::default();
    for (j, g) in got.enumerate() {
        let (t, i) = (j / n_in, j % n_in);
        let v = values[x_offset + t * x_stride + i];
        let want = f16::from_f32(v).to_f32();
        let tol = f16_err(f64::from(v.abs()));
        c.add(f64::from(g), f64::from(want), tol, || {
            format!("{n_tokens}x{n_in} (stride {x_stride}) token {t} input {i}: {v}")
        });
    }
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil;

    #[test]
    fn f16_copy_x_matches_reference() {
        testutil::parity("f16_copy_x", 8, 73);
    }

    /// What the kernel cannot copy is an error naming the op, not a wrong copy: inputs not
    /// in eighths, offsets or a stride off a 16-byte boundary, a stride shorter than a row,
    /// no tokens, X or the copy too short.
    #[test]
    fn f16_copy_x_rejects_what_it_cannot_copy() {
        let Some(gpu) = testutil::gpu() else { return };
        let x = GpuTensor::zeros(gpu, &[64], Dtype::F32);
        let out = GpuTensor::zeros(gpu, &[32], Dtype::F32);
        let copy = |x_at, n_tokens, n_in, stride, out_at| {
            f16_copy_x(
                View::at(&x, x_at),
                n_tokens,
                n_in,
                stride,
                View::at(&out, out_at),
            )
        };
        assert!(copy(0, 2, 16, 16, 0).is_ok());
        for (x_at, n_tokens, n_in, stride, out_at) in [
            (0, 2, 12, 12, 0),
            (2, 2, 16, 16, 0),
            (0, 2, 16, 18, 0),
            (0, 2, 16, 8, 0),
            (0, 2, 16, 16, 2),
            (0, 0, 16, 16, 0),
            (0, 4, 16, 20, 0),
            (0, 2, 16, 16, 28),
        ] {
            let r = copy(x_at, n_tokens, n_in, stride, out_at);
            let err = r.err().map(|e| e.to_string()).unwrap_or_default();
            assert!(
                err.contains("f16_copy_x"),
                "{n_tokens}x{n_in} from {x_at} (stride {stride}) into {out_at}: {err:?}"
            );
        }
    }
}
