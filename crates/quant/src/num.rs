//! Scalar helpers the block formats share: little-endian f16 fields and GGML's rounding rule.

use half::f16;

/// Decode a little-endian IEEE half stored in a block.
#[inline]
pub(crate) fn f16_to_f32(bytes: [u8; 2]) -> f32 {
    f16::from_le_bytes(bytes).to_f32()
}

/// Encode `x` as a little-endian IEEE half, rounding to nearest even (`GGML_FP32_TO_FP16`).
#[inline]
pub(crate) fn f32_to_f16(x: f32) -> [u8; 2] {
    f16::from_f32(x).to_le_bytes()
}

/// GGML's `nearest_int`: round to nearest, ties to even, by adding 1.5 * 2^23 and reading the
/// mantissa. Exact for |x| <= 2^22; any other input (NaN, inf, huge) gives some value, never a
/// panic, and callers clamp the result.
#[inline]
pub(crate) fn nearest_int(x: f32) -> i32 {
    let v = x + 12_582_912.0;
    (v.to_bits() & 0x007f_ffff) as i32 - 0x0040_0000
}

/// The cast the legacy reference quantizers use, `MIN(max, (int8_t)v)`: truncate toward zero,
/// then keep the code in `0..=max` (C leaves out-of-range casts undefined; we clamp).
#[inline]
pub(crate) fn trunc_code(v: f32, max: u8) -> u8 {
    (v as i32).clamp(0, i32::from(max)) as u8
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_int_rounds_half_to_even() {
        for (x, n) in [
            (0.5, 0),
            (1.5, 2),
            (2.5, 2),
            (-0.5, 0),
            (-1.5, -2),
            (3.49, 3),
            (-7.7, -8),
        ] {
            assert_eq!(nearest_int(x), n, "{x}");
        }
    }

    #[test]
    fn f16_round_trip_is_little_endian() {
        assert_eq!(f32_to_f16(1.0), [0x00, 0x3c]);
        assert_eq!(f16_to_f32([0x00, 0xc0]), -2.0);
    }
}
