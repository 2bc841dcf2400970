//! Property tests of the k-quants: quantize -> dequantize error bounds, robustness against
//! arbitrary bytes, and `dot_block` against dequantize-then-dot.
//!
//! The per-weight guarantee the quantizers give (every weight is rounded to the nearest level
//! of its stored sub-block grid) is tested inside the crate, in `src/kquants/mod.rs`, where
//! the stored scales can be read back.

use proptest::prelude::*;
use rullama_gguf::GgmlType;
use rullama_quant::BlockFormat;
use rullama_quant::kquants::{Q2K, Q3K, Q4K, Q5K, Q6K, Q8K, QK_K};

const CASES: u32 = 64;

/// Weights for one block: uniform, sparse (1 in 7 non-zero), one-signed, peaked (`u^3`, many
/// small values and a few large, like trained weights) or with outliers (1 in 16 is 8x), all
/// times 2^e.
fn weights(exponents: std::ops::RangeInclusive<i32>) -> impl Strategy<Value = Vec<f32>> {
    let values = prop::collection::vec(-1.0_f32..1.0, QK_K);
    (values, 0u8..5, exponents).prop_map(|(u, kind, e)| {
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
            2 => v.abs(),
            3 => v * v * v,
            _ => {
                if i % 16 == 0 {
                    8.0 * v
                } else {
                    v
                }
            }
        };
        u.into_iter().enumerate().map(|p| scale * pick(p)).collect()
    })
}

fn round_trip<F: BlockFormat>(x: &[f32]) -> Vec<f32> {
    let mut block = vec![0u8; F::BLOCK_BYTES];
    F::quantize_block(x, &mut block);
    let mut w = vec![0.0; F::BLOCK_SIZE];
    F::dequantize_block(&block, &mut w);
    w
}

/// (RMS error, max error, max |x|) of one round trip.
fn errors<F: BlockFormat>(x: &[f32]) -> (f32, f32, f32) {
    let w = round_trip::<F>(x);
    let sq: f64 = x
        .iter()
        .zip(&w)
        .map(|(&a, &b)| f64::from(a - b).powi(2))
        .sum();
    let max = x
        .iter()
        .zip(&w)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f32::max);
    let amax = x.iter().fold(0.0_f32, |m, v| m.max(v.abs()));
    ((sq / x.len() as f64).sqrt() as f32, max, amax)
}

/// The RMS bound for a format of `bits` bits per level, for a block whose largest |x| is A.
///
/// Derivation: a single grid of 2^b evenly spaced levels spanning [-A, A] has step
/// D = 2A / (2^b - 1) and puts every value within D/2 of a level; a symmetric level set
/// (-2^(b-1) ..= 2^(b-1) - 1, Q3_K and Q6_K) with that step spans [-A - D/2, A - D/2] and
/// does as well. That is the crudest quantizer with b bits per weight. A k-quant gives each
/// 16 or 32 weights their own grid (span at most 2A), starts each search from the min-max
/// grid (error <= half its step), keeps a candidate only when it lowers the search's
/// weighted error, and finally rounds every weight to the nearest stored level; the scale
/// rounding (4 bits in Q2_K, 6 in Q3_K-Q5_K, 8 in Q6_K) moves a sub-block's step by at most
/// half a code. So the RMS error should stay under the crude grid's worst case,
/// D/2 = A / (2^b - 1). It is not a theorem (the searches weight errors by x^2 or |x| and can
/// clip one weight to fit the rest; the max error can exceed D/2, which is why only the RMS
/// is bounded here), and the worst case we know is Q3_K on data that is exactly +-A, where
/// 8 levels cannot be symmetric: RMS 0.49 D.
fn rms_bound(bits: i32, amax: f32) -> f32 {
    amax / ((1 << bits) - 1) as f32
}

/// Magnitudes 2^-2 ..= 2^10 keep every f16 factor (down to Q6_K's d = A / 4096) a normal
/// number; below that the f16 rounding of the factors costs absolute, not relative, error.
const F16_NORMAL_EXPONENTS: std::ops::RangeInclusive<i32> = -2..=10;

fn check_rms<F: BlockFormat>(bits: i32, x: &[f32]) -> Result<(), TestCaseError> {
    let (rms, max, amax) = errors::<F>(x);
    let bound = rms_bound(bits, amax);
    prop_assert!(
        rms <= bound,
        "{}: RMS {rms} > {bound} (max |x| {amax}, max error {max})",
        F::FORMAT
    );
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(CASES))]

    #[test]
    fn q2_k_rms_error_within_2_bit_bound(x in weights(F16_NORMAL_EXPONENTS)) {
        check_rms::<Q2K>(2, &x)?;
    }

    #[test]
    fn q3_k_rms_error_within_3_bit_bound(x in weights(F16_NORMAL_EXPONENTS)) {
        check_rms::<Q3K>(3, &x)?;
    }

    #[test]
    fn q4_k_rms_error_within_4_bit_bound(x in weights(F16_NORMAL_EXPONENTS)) {
        check_rms::<Q4K>(4, &x)?;
    }

    #[test]
    fn q5_k_rms_error_within_5_bit_bound(x in weights(F16_NORMAL_EXPONENTS)) {
        check_rms::<Q5K>(5, &x)?;
    }

    #[test]
    fn q6_k_rms_error_within_6_bit_bound(x in weights(F16_NORMAL_EXPONENTS)) {
        check_rms::<Q6K>(6, &x)?;
    }

    /// Q8_K stores d = max / -127 as an f32 and rounds x / d to the nearest integer, which
    /// never leaves -127..=127 for |x| <= A; so every error is at most |d| / 2 = A / 254, plus
    /// the f32 roundings of x * (1/d), 1/iscale and d * q: at most 3 ulp-sized terms of A,
    /// bounded by 4 * eps * A. That bounds the RMS too. Any f32 magnitude works (no f16).
    #[test]
    fn q8_k_max_error_within_half_step(x in weights(-60..=60)) {
        let (rms, max, amax) = errors::<Q8K>(&x);
        let bound = amax / 254.0 + 4.0 * f32::EPSILON * amax;
        prop_assert!(max <= bound, "Q8_K: max error {max} > {bound}");
        prop_assert!(rms <= bound, "Q8_K: RMS {rms} > {bound}");
    }
}

/// Decoding arbitrary bytes must not panic (NaN and inf factors included), and `dot_block`
/// must agree with dequantize-then-dot. Both compute the same products `w_i * x_i` (dot
/// decodes one sub-block into a stack buffer with the same code); only the summation order
/// differs (dot: within each sub-block of <= 32, then across <= 16 sub-blocks), so the
/// difference from the exact sum is at most gamma_48 * sum |w_i x_i| with
/// gamma_48 = 48 eps / (1 - 48 eps) < 3e-6; we allow 1e-5 of it, plus 1e-30 for sums that
/// underflow.
fn check_bytes<F: BlockFormat>(block: &[u8], x: &[f32]) -> Result<(), TestCaseError> {
    let mut w = vec![0.0_f32; F::BLOCK_SIZE];
    F::dequantize_block(block, &mut w);
    let dot = F::dot_block(block, x);
    let exact: f64 = w
        .iter()
        .zip(x)
        .map(|(&w, &x)| f64::from(w) * f64::from(x))
        .sum();
    let magnitude: f64 = w
        .iter()
        .zip(x)
        .map(|(&w, &x)| (f64::from(w) * f64::from(x)).abs())
        .sum();
    // A block whose weights or products overflow f32 has no finite dot to compare.
    if w.iter().all(|w| w.is_finite()) && magnitude < f64::from(f32::MAX) / 2.0 {
        let tol = 1e-5 * magnitude + 1e-30;
        prop_assert!(
            (f64::from(dot) - exact).abs() <= tol,
            "{}: dot {dot} vs {exact} (tol {tol})",
            F::FORMAT
        );
    }
    Ok(())
}

fn bytes_and_x(n_bytes: usize) -> impl Strategy<Value = (Vec<u8>, Vec<f32>)> {
    (
        prop::collection::vec(any::<u8>(), n_bytes),
        prop::collection::vec(-1.0_f32..1.0, QK_K),
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(CASES))]

    #[test]
    fn q2_k_any_bytes_decode_and_dot((b, x) in bytes_and_x(Q2K::BLOCK_BYTES)) {
        check_bytes::<Q2K>(&b, &x)?;
    }

    #[test]
    fn q3_k_any_bytes_decode_and_dot((b, x) in bytes_and_x(Q3K::BLOCK_BYTES)) {
        check_bytes::<Q3K>(&b, &x)?;
    }

    #[test]
    fn q4_k_any_bytes_decode_and_dot((b, x) in bytes_and_x(Q4K::BLOCK_BYTES)) {
        check_bytes::<Q4K>(&b, &x)?;
    }

    #[test]
    fn q5_k_any_bytes_decode_and_dot((b, x) in bytes_and_x(Q5K::BLOCK_BYTES)) {
        check_bytes::<Q5K>(&b, &x)?;
    }

    #[test]
    fn q6_k_any_bytes_decode_and_dot((b, x) in bytes_and_x(Q6K::BLOCK_BYTES)) {
        check_bytes::<Q6K>(&b, &x)?;
    }

    #[test]
    fn q8_k_any_bytes_decode_and_dot((b, x) in bytes_and_x(Q8K::BLOCK_BYTES)) {
        check_bytes::<Q8K>(&b, &x)?;
    }

    /// Quantizing the decoded weights again reproduces them within the same RMS bound: the
    /// decoded block is already on a grid the quantizer can represent.
    #[test]
    fn q4_k_requantizing_decoded_weights_stays_within_bound(x in weights(F16_NORMAL_EXPONENTS)) {
        let w = round_trip::<Q4K>(&x);
        check_rms::<Q4K>(4, &w)?;
    }
}

#[test]
fn block_geometry_matches_the_gguf_table() {
    fn check<F: BlockFormat>(t: GgmlType) {
        assert_eq!(F::FORMAT, rullama_quant::Format::Ggml(t));
        assert_eq!(
            (F::BLOCK_SIZE, F::BLOCK_BYTES),
            (t.layout().block_size, t.layout().type_size),
            "{t:?}"
        );
    }
    check::<Q2K>(GgmlType::Q2K);
    check::<Q3K>(GgmlType::Q3K);
    check::<Q4K>(GgmlType::Q4K);
    check::<Q5K>(GgmlType::Q5K);
    check::<Q6K>(GgmlType::Q6K);
    check::<Q8K>(GgmlType::Q8K);
}

/// All-zero input gives an all-zero block for every type (GGML's special cases for it).
#[test]
fn zero_input_gives_zero_block() {
    fn check<F: BlockFormat>() {
        let mut block = vec![0xAAu8; F::BLOCK_BYTES];
        F::quantize_block(&[0.0; QK_K], &mut block);
        let mut w = vec![1.0_f32; QK_K];
        F::dequantize_block(&block, &mut w);
        assert!(w.iter().all(|&w| w == 0.0), "{}", F::FORMAT);
    }
    check::<Q2K>();
    check::<Q3K>();
    check::<Q4K>();
    check::<Q5K>();
    check::<Q6K>();
    check::<Q8K>();
}

// Q8_K has no decoder in the Python reference; its definition is one f32 scale times each
// signed byte, and the quantizer fills `bsums` with the sums of each 16 levels, as GGML's dot
// kernels expect.
proptest! {
    #![proptest_config(ProptestConfig::with_cases(CASES))]

    #[test]
    fn q8_k_decodes_to_d_times_level(x in weights(-60..=60)) {
        let mut block = vec![0u8; Q8K::BLOCK_BYTES];
        Q8K::quantize_block(&x, &mut block);
        let mut w = vec![0.0; QK_K];
        Q8K::dequantize_block(&block, &mut w);
        let d = f32::from_le_bytes([block[0], block[1], block[2], block[3]]);
        let levels = &block[4..4 + QK_K];
        for (i, &w) in w.iter().enumerate() {
            prop_assert_eq!(w.to_bits(), (d * f32::from(levels[i] as i8)).to_bits(), "weight {}", i);
        }
        let bsums = &block[4 + QK_K..];
        for s in 0..QK_K / 16 {
            let want: i16 = levels[16 * s..16 * s + 16].iter().map(|&q| i16::from(q as i8)).sum();
            prop_assert_eq!(i16::from_le_bytes([bsums[2 * s], bsums[2 * s + 1]]), want, "bsums[{}]", s);
        }
    }
}
