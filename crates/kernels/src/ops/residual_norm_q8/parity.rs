//! The q8 output's parity check: the plain kernel's h and y and quantize_q8's words.

use super::*;
use crate::device::Gpu;
use crate::ops::quantize::quantize_q8;
use crate::ops::quantize::{Q8_BLOCK, q8_words};
use crate::parity::data::{Rng, random_f32};
use crate::parity::{Check, Compare};
use crate::readback::Readback;
use crate::step::StepBuilder;
use crate::tensor::Dtype;

/// Tolerance: none. h and y equal the plain kernel's (`residual_norm`, entry `main_out`) bit
/// for bit, and the q8 copy equals the words `quantize_q8` writes from that y (the same rule's
/// code on the same values; the max is exact in any order); words outside the copy untouched.
/// y's own accuracy is the plain kernel's check. Cases: widths 32..4096 (multiples of 32),
/// the pre-norm on or off, a block of y zeroed (d = 0) and one with an outlier.
pub const CHECK: Check = Check {
    name: "residual_norm_q8",
    tolerance: "exact: h, y = residual_norm's; q = quantize_q8(y)'s words",
    case: parity_case,
};

/// Sentinel of q's words outside the copy.
const UNTOUCHED: u32 = 0xdead_beef;

fn parity_case(gpu: &Gpu, rng: &mut Rng) -> Result<Compare, GpuError> {
    let n = Q8_BLOCK * rng.range(1, 129);
    let pre_norm = rng.bool();
    compare(gpu, n, pre_norm, rng.next_u64())
}

/// Runs the plain kernel, the q8 variant and `quantize_q8` of the variant's y in one step over
/// one row of `n`; compares exactly.
fn compare(gpu: &Gpu, n: usize, pre_norm: bool, seed: u64) -> Result<Compare, GpuError> {
    let norm = ResidualNorm {
        n,
        n_rows: 1,
        eps: 1e-6,
    };
    let a: Vec<f32> = random_f32(n, seed).iter().map(|v| v * 3.0).collect();
    let h = random_f32(n, seed ^ 1);
    let w_in = random_f32(n, seed ^ 2);
    let mut w_out = random_f32(n, seed ^ 3);
    // A block of y zeroed by its gains (d = 0), and an outlier 100x the rest in another
    // (every other input of that block small against the amax), where there are two blocks.
    let blocks = n / Q8_BLOCK;
    w_out[(seed as usize % blocks) * Q8_BLOCK..][..Q8_BLOCK].fill(0.0);
    if blocks > 1 {
        let b = (seed as usize / 7 + 1) % blocks;
        w_out[b * Q8_BLOCK + 5] *= 100.0;
    }
    let at = GpuTensor::from_f32(gpu, &[n], &a);
    let wit = GpuTensor::from_f32(gpu, &[n], &w_in);
    let wot = GpuTensor::from_f32(gpu, &[n], &w_out);
    let w_in_t = pre_norm.then_some(&wit);
    // The plain kernel's h and y; the variant's, at odd offsets; its q at word 4 of a tensor
    // of sentinels; quantize_q8's words of the variant's y.
    let h_plain = GpuTensor::from_f32(gpu, &[n], &h);
    let y_plain = GpuTensor::zeros(gpu, &[n], Dtype::F32);
    let h_q8 = GpuTensor::from_f32(gpu, &[n + 1], &[&[5.0], &h[..]].concat());
    let y_q8 = GpuTensor::zeros(gpu, &[n + 3], Dtype::F32);
    let words = q8_words(n);
    let q_len = 4 + words + 3;
    let qt = GpuTensor::from_u32(gpu, &[q_len], &vec![UNTOUCHED; q_len]);
    let q_ref = GpuTensor::zeros(gpu, &[words], Dtype::U32);
    let mut b = StepBuilder::new();
    b.push(norm.op(
        (&at).into(),
        w_in_t,
        (&h_plain).into(),
        Some(NormOut {
            y: (&y_plain).into(),
            weight: &wot,
        }),
    )?);
    b.push(norm.op_q8(
        (&at).into(),
        w_in_t,
        View::at(&h_q8, 1),
        NormOut {
            y: View::at(&y_q8, 3),
            weight: &wot,
        },
        View::at(&qt, 4),
    )?);
    b.push(quantize_q8(View::at(&y_q8, 3), (&q_ref).into(), n)?);
    let mut step = b.build(gpu);
    let rb = Readback::new(gpu, (q_len.max(n) * 4) as u64);
    let mut q_gpu = vec![0u32; q_len];
    rb.run_and_read(gpu, &mut step, &qt, 0, &mut q_gpu)?;
    let read = |t: &GpuTensor, offset: usize, len: usize| -> Result<Vec<u32>, GpuError> {
        let mut out = vec![0u32; len];
        rb.read(gpu, t, offset, &mut out)?;
        Ok(out)
    };
    let want_q = read(&q_ref, 0, words)?;
    let pairs = [
        ("h", read(&h_q8, 1, n)?, read(&h_plain, 0, n)?),
        ("y", read(&y_q8, 3, n)?, read(&y_plain, 0, n)?),
        ("q word", q_gpu[4..4 + words].to_vec(), want_q),
    ];
    let mut c = Compare::default();
    for (what, got, want) in pairs {
        for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
            c.exact(f64::from(g), f64::from(w), || {
                format!("n {n} pre {pre_norm}: {what} {i} (bits {g:#x} vs {w:#x})")
            });
        }
    }
    let outside = (0..4).chain(4 + words..q_len);
    for i in outside {
        c.exact(f64::from(q_gpu[i]), f64::from(UNTOUCHED), || {
            format!("n {n}: q word {i} outside the copy")
        });
    }
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil;

    #[test]
    fn residual_norm_q8_matches_plain_and_quantize() {
        testutil::parity("residual_norm_q8", 8, 71);
    }

    /// The real models' widths (576, 640), one full tile (4096) and past it (4128, 8192: the
    /// kernel's later tiles, which re-read h), with and without the pre-norm.
    #[test]
    fn widths_and_tiles() {
        let Some(gpu) = testutil::gpu() else { return };
        for n in [32, 576, 640, 4096, 4128, 8192] {
            for pre in [false, true] {
                let c = compare(gpu, n, pre, n as u64).unwrap();
                assert!(c.max_ratio <= 1.0, "{}", c.worst);
            }
        }
    }

    /// More than one row, a width that is not whole blocks, a misaligned or short q, q in
    /// y's tensor: typed errors.
    #[test]
    fn checks_its_arguments() {
        let Some(gpu) = testutil::gpu() else { return };
        let t = |len| GpuTensor::zeros(gpu, &[len], Dtype::F32);
        let (a, h, y, w) = (t(128), t(128), t(128), t(64));
        let q = t(q8_words(64) + 4);
        let op = |n: usize, n_rows: usize, q: View<'_>, y: View<'_>| {
            ResidualNorm {
                n,
                n_rows,
                eps: 1e-6,
            }
            .op_q8((&a).into(), None, (&h).into(), NormOut { y, weight: &w }, q)
        };
        assert!(op(64, 1, (&q).into(), (&y).into()).is_ok());
        assert!(op(64, 1, View::at(&q, 4), (&y).into()).is_ok());
        let bad = [
            op(64, 2, (&q).into(), (&y).into()),
            op(48, 1, (&q).into(), (&y).into()),
            op(64, 1, View::at(&q, 2), (&y).into()),
            op(64, 1, View::at(&q, 8), (&y).into()),
            op(64, 1, View::at(&y, 64), (&y).into()),
        ];
        for (i, r) in bad.iter().enumerate() {
            assert!(
                matches!(
                    r,
                    Err(GpuError::InvalidParams { .. } | GpuError::Shape { .. })
                ),
                "case {i}: {:?}",
                r.as_ref().err()
            );
        }
    }
}
