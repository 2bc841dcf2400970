//! Q4_1: 32 weights as 4-bit codes above a minimum, one f16 scale and one f16 minimum.

use bytemuck::{Pod, Zeroable};
use rullama_gguf::GgmlType;

use crate::format::{BlockFormat, Format};
use crate::num::{f16_to_f32, f32_to_f16, trunc_code};

/// `w[j] = d * q[j] + m`; nibbles ordered as in Q4_0 (low: `j`, high: `j + 16`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Pod, Zeroable)]
pub struct BlockQ4_1 {
    /// The scale `d`, f16 bits.
    pub d: [u8; 2],
    /// The offset `m`, f16 bits.
    pub m: [u8; 2],
    /// Two 4-bit codes a byte.
    pub qs: [u8; 16],
}

const _: () = assert!(size_of::<BlockQ4_1>() == 20);

/// The Q4_1 format.
#[derive(Debug, Clone, Copy)]
pub struct Q4_1;

impl BlockFormat for Q4_1 {
    const FORMAT: Format = Format::Ggml(GgmlType::Q4_1);
    const BLOCK_SIZE: usize = 32;
    const BLOCK_BYTES: usize = size_of::<BlockQ4_1>();

    fn dequantize_block(block: &[u8], out: &mut [f32]) {
        let b: &BlockQ4_1 = bytemuck::from_bytes(block);
        let (d, m) = (f16_to_f32(b.d), f16_to_f32(b.m));
        for (j, &q) in b.qs.iter().enumerate() {
            out[j] = f32::from(q & 0x0f) * d + m;
            out[j + 16] = f32::from(q >> 4) * d + m;
        }
    }

    /// `quantize_row_q4_1_ref`: `d = (max - min) / 15`, `m = min`, codes round half up.
    fn quantize_block(x: &[f32], block: &mut [u8]) {
        let (mut min, mut max) = (f32::MAX, -f32::MAX);
        for &v in x {
            if v < min {
                min = v;
            }
            if v > max {
                max = v;
            }
        }
        let d = (max - min) / 15.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        let b: &mut BlockQ4_1 = bytemuck::from_bytes_mut(block);
        b.d = f32_to_f16(d);
        b.m = f32_to_f16(min);
        for (j, q) in b.qs.iter_mut().enumerate() {
            let lo = trunc_code((x[j] - min) * id + 0.5, 15);
            let hi = trunc_code((x[j + 16] - min) * id + 0.5, 15);
            *q = lo | (hi << 4);
        }
    }

    /// Each weight is formed exactly as [`Self::dequantize_block`] forms it (factoring `m` out
    /// would trade the rounding of `d * q + m` for cancellation between two large sums).
    fn dot_block(block: &[u8], x: &[f32]) -> f32 {
        let b: &BlockQ4_1 = bytemuck::from_bytes(block);
        let (d, m) = (f16_to_f32(b.d), f16_to_f32(b.m));
        let mut sum = 0.0f32;
        for (j, &q) in b.qs.iter().enumerate() {
            sum += (f32::from(q & 0x0f) * d + m) * x[j];
            sum += (f32::from(q >> 4) * d + m) * x[j + 16];
        }
        sum
    }
}
