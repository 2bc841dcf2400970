//! The k-quants: GGML's 256-weight "super-block" formats Q2_K, Q3_K, Q4_K, Q5_K, Q6_K and Q8_K.
//!
//! Each super-block holds one or two f16 factors and a small integer scale (and, for the
//! asymmetric types, a small integer min) per 16- or 32-weight sub-block, so the weights get
//! their own range every 16-32 values while the per-weight cost stays near the bit depth.
//! Layouts follow llama.cpp's `ggml-common.h`; dequantization reproduces its
//! `dequantize_row_q*_K` bit for bit (same float operations in the same order), and
//! quantization ports its reference quantizers `quantize_row_q*_K_ref` (no importance matrix).
//! The byte layouts are described in `docs/FORMATS.md`, section "K-quants".

mod q2_k;
mod q3_k;
mod q4_k;
mod q5_k;
mod q6_k;
mod q8_k;
mod scales;

pub use q2_k::{BlockQ2K, Q2K};
pub use q3_k::{BlockQ3K, Q3K};
pub use q4_k::{BlockQ4K, Q4K};
pub use q5_k::{BlockQ5K, Q5K};
pub use q6_k::{BlockQ6K, Q6K};
pub use q8_k::{BlockQ8K, Q8K};
pub use scales::{pack_scale_min_k4, unpack_scale_min_k4};

/// Weights per super-block, for every k-quant (GGML's `QK_K`).
pub const QK_K: usize = 256;

use crate::num::{f16_to_f32, f32_to_f16};

/// Decodes a block sub-block by sub-block with `decode(s, out)`, which fills `out` with the
/// `N` weights of sub-block `s` exactly as `dequantize_block` would.
fn dequantize_sub_blocks<const N: usize>(out: &mut [f32], decode: impl Fn(usize, &mut [f32])) {
    for (s, out) in out.chunks_exact_mut(N).enumerate() {
        decode(s, out);
    }
}

/// `sum_i w_i x_i`, decoding one sub-block of `N` weights at a time into a stack buffer. The
/// products are those of dequantize-then-dot; only the summation order (per sub-block, then
/// across) differs, so the two agree to f32 summation error.
fn dot_sub_blocks<const N: usize>(x: &[f32], decode: impl Fn(usize, &mut [f32])) -> f32 {
    let mut w = [0.0_f32; N];
    let mut sum = 0.0_f32;
    for (s, x) in x.chunks_exact(N).enumerate() {
        decode(s, &mut w);
        let mut part = 0.0_f32;
        for (&w, &x) in w.iter().zip(x) {
            part += w * x;
        }
        sum += part;
    }
    sum
}

/// The quantizers' last pass rounds every weight to the nearest level of its sub-block's grid
/// as stored (scales already rounded to their bit widths). That gives the one strict
/// per-weight error bound these formats have: the error equals the distance from the input
/// to that grid, so at most half a stored step inside the grid's span. (How well the stored
/// grid fits the data is up to the scale searches, which are heuristics; the RMS bounds in
/// `tests/kquants_props.rs` cover that.)
#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::BlockFormat;

    /// Quantizes `x` with `F` and checks every weight against `grid(block, s)`, the values
    /// sub-block `s` (of `n` weights) can decode to.
    fn assert_nearest_level<F: BlockFormat>(
        x: &[f32],
        n: usize,
        grid: impl Fn(&[u8], usize) -> Vec<f32>,
    ) -> Result<(), TestCaseError> {
        let mut block = vec![0u8; F::BLOCK_BYTES];
        F::quantize_block(x, &mut block);
        let mut w = vec![0.0_f32; F::BLOCK_SIZE];
        F::dequantize_block(&block, &mut w);
        for (s, (x, w)) in x.chunks_exact(n).zip(w.chunks_exact(n)).enumerate() {
            let grid = grid(&block, s);
            let span = grid.iter().fold(0.0_f32, |m, g| m.max(g.abs()));
            for (&x, &w) in x.iter().zip(w) {
                let nearest = grid
                    .iter()
                    .map(|g| (x - g).abs())
                    .fold(f32::INFINITY, f32::min);
                // The encoder rounds (x + m) / d and the decoder d * q - m, each a few f32
                // roundings of quantities no larger than |x| + span.
                let tol = 8.0 * f32::EPSILON * (x.abs() + span);
                prop_assert!(
                    (x - w).abs() <= nearest + tol,
                    "{}: sub-block {s}: x = {x}, decoded {w}, nearest level is {nearest} away",
                    F::FORMAT
                );
            }
        }
        Ok(())
    }

    /// Grid `d * l - m` for `l` in `levels`.
    fn affine(d: f32, m: f32, levels: std::ops::RangeInclusive<i32>) -> Vec<f32> {
        levels.map(|l| d * l as f32 - m).collect()
    }

    /// Weights of magnitude 2^-2 to 2^10 (every f16 factor stays a normal number), uniform,
    /// sparse, or one-signed.
    fn weights() -> impl Strategy<Value = Vec<f32>> {
        let values = prop::collection::vec(-1.0_f32..1.0, QK_K);
        (values, 0u8..3, -2i32..=10).prop_map(|(u, kind, e)| {
            let scale = 2.0_f32.powi(e);
            let pick = |(i, v): (usize, f32)| match kind {
                0 => v,
                1 => {
                    if i % 7 == 0 {
                        v
                    } else {
                        0.0
                    }
                }
                _ => v.abs(),
            };
            u.into_iter().enumerate().map(|p| scale * pick(p)).collect()
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn q2_k_rounds_to_nearest_stored_level(x in weights()) {
            assert_nearest_level::<Q2K>(&x, 16, |b, s| {
                let (d, m) = bytemuck::from_bytes::<BlockQ2K>(b).scale_min(s);
                affine(d, m, 0..=3)
            })?;
        }

        #[test]
        fn q3_k_rounds_to_nearest_stored_level(x in weights()) {
            assert_nearest_level::<Q3K>(&x, 16, |b, s| {
                affine(bytemuck::from_bytes::<BlockQ3K>(b).scale(s), 0.0, -4..=3)
            })?;
        }

        #[test]
        fn q4_k_rounds_to_nearest_stored_level(x in weights()) {
            assert_nearest_level::<Q4K>(&x, 32, |b, s| {
                let (d, m) = bytemuck::from_bytes::<BlockQ4K>(b).scale_min(s);
                affine(d, m, 0..=15)
            })?;
        }

        #[test]
        fn q5_k_rounds_to_nearest_stored_level(x in weights()) {
            assert_nearest_level::<Q5K>(&x, 32, |b, s| {
                let (d, m) = bytemuck::from_bytes::<BlockQ5K>(b).scale_min(s);
                affine(d, m, 0..=31)
            })?;
        }

        #[test]
        fn q6_k_rounds_to_nearest_stored_level(x in weights()) {
            assert_nearest_level::<Q6K>(&x, 16, |b, s| {
                affine(bytemuck::from_bytes::<BlockQ6K>(b).scale(s), 0.0, -32..=31)
            })?;
        }

        #[test]
        fn q8_k_rounds_to_nearest_stored_level(x in weights()) {
            assert_nearest_level::<Q8K>(&x, QK_K, |b, _| {
                let d = f32::from_le_bytes(bytemuck::from_bytes::<BlockQ8K>(b).d);
                affine(d, 0.0, -128..=127)
            })?;
        }
    }
}
