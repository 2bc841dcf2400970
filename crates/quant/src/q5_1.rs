//! Q5_1: 32 weights as 5-bit codes above a minimum, one f16 scale and one f16 minimum.

use bytemuck::{Pod, Zeroable};
use rullama_gguf::GgmlType;

use crate::format::{BlockFormat, Format};
use crate::num::{f16_to_f32, f32_to_f16, trunc_code};
use crate::q5_0::{five_bit_codes, pack_five_bit};

/// `w[j] = d * q[j] + m`; codes packed as in Q5_0.
#[repr(C)]
#[derive(Debug, Clone, Copy, Pod, Zeroable)]
pub struct BlockQ5_1 {
    /// The scale `d`, f16 bits.
    pub d: [u8; 2],
    /// The offset `m`, f16 bits.
    pub m: [u8; 2],
    /// The codes' fifth bits, a little-endian u32.
    pub qh: [u8; 4],
    /// The codes' low four bits, two a byte.
    pub qs: [u8; 16],
}

const _: () = assert!(size_of::<BlockQ5_1>() == 24);

impl BlockQ5_1 {
    fn weights(&self, j: usize) -> (f32, f32) {
        let (d, m) = (f16_to_f32(self.d), f16_to_f32(self.m));
        let (c0, c1) = five_bit_codes(self.qs[j], u32::from_le_bytes(self.qh), j);
        (f32::from(c0) * d + m, f32::from(c1) * d + m)
    }
}

/// The Q5_1 format.
#[derive(Debug, Clone, Copy)]
pub struct Q5_1;

impl BlockFormat for Q5_1 {
    const FORMAT: Format = Format::Ggml(GgmlType::Q5_1);
    const BLOCK_SIZE: usize = 32;
    const BLOCK_BYTES: usize = size_of::<BlockQ5_1>();

    fn dequantize_block(block: &[u8], out: &mut [f32]) {
        let b: &BlockQ5_1 = bytemuck::from_bytes(block);
        for j in 0..16 {
            (out[j], out[j + 16]) = b.weights(j);
        }
    }

    /// `quantize_row_q5_1_ref`: `d = (max - min) / 31`, `m = min`, codes round half up.
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
        let d = (max - min) / 31.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        let codes: [u8; 32] = std::array::from_fn(|j| trunc_code((x[j] - min) * id + 0.5, 31));
        let b: &mut BlockQ5_1 = bytemuck::from_bytes_mut(block);
        b.d = f32_to_f16(d);
        b.m = f32_to_f16(min);
        pack_five_bit(&codes, &mut b.qs, &mut b.qh);
    }

    /// Weights formed exactly as in dequantization (see Q4_1 for why `m` is not factored out).
    fn dot_block(block: &[u8], x: &[f32]) -> f32 {
        let b: &BlockQ5_1 = bytemuck::from_bytes(block);
        let mut sum = 0.0f32;
        for j in 0..16 {
            let (w0, w1) = b.weights(j);
            sum += w0 * x[j] + w1 * x[j + 16];
        }
        sum
    }
}
