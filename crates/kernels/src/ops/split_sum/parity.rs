//! The split sum's CPU reference and parity check.

use super::*;
use crate::device::Gpu;
use crate::parity::data::{Rng, random_f32};
use crate::parity::{Check, Compare, U, run_read};
use crate::tensor::GpuTensor;

/// CPU reference, in f64: `out[r * out_stride + c] = (out[..] if accumulate, else 0) +
/// sum_z src[z * n_rows * n_cols + r * n_cols + c]`.
pub fn split_sum_ref(s: &SplitSum, src: &[f64], out: &mut [f64]) {
    let len = s.slice_len();
    for i in 0..len {
        let at = (i / s.n_cols) * s.out_stride + i % s.n_cols;
        let mut sum = if s.accumulate { out[at] } else { 0.0 };
        for z in 0..s.slices {
            sum += src[z * len + i];
        }
        out[at] = sum;
    }
}

/// Tolerance, per element: `slices u (sum_z |src_z| + |out0|)` (any order of `slices + 1`
/// f32 terms; the kernel adds in split order).
pub const CHECK: Check = Check {
    name: "split_sum",
    tolerance: "slices*2^-24*(sum_z|src_z| + |out0|)",
    case: parity_case,
};

fn parity_case(gpu: &Gpu, rng: &mut Rng) -> Result<Compare, GpuError> {
    let s = SplitSum {
        n_rows: rng.range(1, 40),
        n_cols: rng.range(1, 300),
        slices: rng.range(1, 9),
        out_stride: 0,
        accumulate: rng.bool(),
    };
    let s = SplitSum {
        out_stride: s.n_cols + rng.range(0, 3),
        ..s
    };
    let (src_off, out_off) = (rng.range(0, 4), rng.range(0, 4));
    let src = random_f32(src_off + s.slices * s.slice_len(), rng.next_u64());
    let out_len = out_off + s.n_rows * s.out_stride;
    let out = random_f32(out_len, rng.next_u64());
    let st = GpuTensor::from_f32(gpu, &[src.len()], &src);
    let ot = GpuTensor::from_f32(gpu, &[out_len], &out);
    let op = s.op(View::at(&st, src_off), View::at(&ot, out_off))?;
    let got: Vec<f32> = run_read(gpu, vec![op], &ot, 0, out_len)?;
    let f = |v: &[f32]| v.iter().map(|&x| f64::from(x)).collect::<Vec<f64>>();
    let mut want = f(&out);
    split_sum_ref(&s, &f(&src)[src_off..], &mut want[out_off..]);
    let mut c = Compare::default();
    let len = s.slice_len();
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        let inside = i >= out_off && (i - out_off) % s.out_stride < s.n_cols;
        if !inside {
            c.exact(f64::from(*g), f64::from(out[i]), || {
                format!("outside, elem {i}")
            });
            continue;
        }
        let e = i - out_off;
        let k = (e / s.out_stride) * s.n_cols + e % s.out_stride;
        let mut mass: f64 = (0..s.slices)
            .map(|z| f64::from(src[src_off + z * len + k]).abs())
            .sum();
        if s.accumulate {
            mass += f64::from(out[i]).abs();
        }
        let bound = s.slices as f64 * U * mass;
        c.add(f64::from(*g), *w, bound, || format!("{s:?} elem {i}"));
    }
    Ok(c)
}

#[cfg(test)]
mod tests {
    use crate::testutil;

    #[test]
    fn split_sum_matches_reference() {
        testutil::parity("split_sum", 20, 501);
    }
}
