//! The unquantized types: F32, F16 and BF16, each a "block" of one little-endian value.

use rullama_gguf::GgmlType;

use crate::format::{BlockFormat, Format};
use crate::num::{f16_to_f32, f32_to_f16};

/// IEEE single precision, stored as is.
#[derive(Debug, Clone, Copy)]
pub struct F32;

/// IEEE half precision (1 sign, 5 exponent, 10 mantissa bits).
#[derive(Debug, Clone, Copy)]
pub struct F16;

/// bfloat16: the top 16 bits of an f32 (1 sign, 8 exponent, 7 mantissa bits).
#[derive(Debug, Clone, Copy)]
pub struct Bf16;

impl BlockFormat for F32 {
    const FORMAT: Format = Format::Ggml(GgmlType::F32);
    const BLOCK_SIZE: usize = 1;
    const BLOCK_BYTES: usize = 4;

    fn dequantize_block(block: &[u8], out: &mut [f32]) {
        out[0] = f32::from_le_bytes([block[0], block[1], block[2], block[3]]);
    }

    fn quantize_block(x: &[f32], block: &mut [u8]) {
        block.copy_from_slice(&x[0].to_le_bytes());
    }

    fn dot_block(block: &[u8], x: &[f32]) -> f32 {
        f32::from_le_bytes([block[0], block[1], block[2], block[3]]) * x[0]
    }
}

impl BlockFormat for F16 {
    const FORMAT: Format = Format::Ggml(GgmlType::F16);
    const BLOCK_SIZE: usize = 1;
    const BLOCK_BYTES: usize = 2;

    fn dequantize_block(block: &[u8], out: &mut [f32]) {
        out[0] = f16_to_f32([block[0], block[1]]);
    }

    fn quantize_block(x: &[f32], block: &mut [u8]) {
        block.copy_from_slice(&f32_to_f16(x[0]));
    }

    fn dot_block(block: &[u8], x: &[f32]) -> f32 {
        f16_to_f32([block[0], block[1]]) * x[0]
    }
}

/// GGML's `ggml_compute_fp32_to_bf16`: NaN is kept (and made quiet), everything else rounds to
/// nearest even. Infinities and overflow to infinity come out of the same addition.
fn f32_to_bf16_bits(x: f32) -> u16 {
    let u = x.to_bits();
    if u & 0x7fff_ffff > 0x7f80_0000 {
        return ((u >> 16) | 64) as u16;
    }
    ((u + (0x7fff + ((u >> 16) & 1))) >> 16) as u16
}

fn bf16_to_f32(block: &[u8]) -> f32 {
    f32::from_bits(u32::from(u16::from_le_bytes([block[0], block[1]])) << 16)
}

impl BlockFormat for Bf16 {
    const FORMAT: Format = Format::Ggml(GgmlType::Bf16);
    const BLOCK_SIZE: usize = 1;
    const BLOCK_BYTES: usize = 2;

    fn dequantize_block(block: &[u8], out: &mut [f32]) {
        out[0] = bf16_to_f32(block);
    }

    fn quantize_block(x: &[f32], block: &mut [u8]) {
        block.copy_from_slice(&f32_to_bf16_bits(x[0]).to_le_bytes());
    }

    fn dot_block(block: &[u8], x: &[f32]) -> f32 {
        bf16_to_f32(block) * x[0]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bf16_rounds_to_nearest_even_and_keeps_nan() {
        assert_eq!(f32_to_bf16_bits(1.0), 0x3f80);
        // 1 + 2^-8 is halfway between two bf16 values: ties go to the even one (1.0).
        assert_eq!(f32_to_bf16_bits(1.0 + 1.0 / 256.0), 0x3f80);
        assert_eq!(f32_to_bf16_bits(1.0 + 3.0 / 256.0), 0x3f82);
        assert_eq!(f32_to_bf16_bits(f32::INFINITY), 0x7f80);
        assert!(f32::from_bits(u32::from(f32_to_bf16_bits(f32::NAN)) << 16).is_nan());
        // A NaN whose payload lives only in the low half stays NaN instead of becoming inf.
        assert_eq!(f32_to_bf16_bits(f32::from_bits(0x7f80_0001)), 0x7fc0);
    }
}
