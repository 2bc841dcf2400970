//! Q8_1: Q8_0 plus the block's sum, the format GGML quantizes activations into for Q4_1/Q5_1
//! dot products. Never stored in model files.

use bytemuck::{Pod, Zeroable};
use rullama_gguf::GgmlType;

use crate::format::{BlockFormat, Format};
use crate::num::{f16_to_f32, f32_to_f16};
use crate::q8_0::quantize_q8;

/// `w[j] = d * qs[j]`; `s = d * sum(qs)` (both f16) saves the dot product a pass.
#[repr(C)]
#[derive(Debug, Clone, Copy, Pod, Zeroable)]
pub struct BlockQ8_1 {
    /// The scale `d`, f16 bits.
    pub d: [u8; 2],
    /// `d * sum(qs)`, f16 bits.
    pub s: [u8; 2],
    /// The 8-bit codes.
    pub qs: [i8; 32],
}

const _: () = assert!(size_of::<BlockQ8_1>() == 36);

/// The Q8_1 format.
#[derive(Debug, Clone, Copy)]
pub struct Q8_1;

impl BlockFormat for Q8_1 {
    const FORMAT: Format = Format::Ggml(GgmlType::Q8_1);
    const BLOCK_SIZE: usize = 32;
    const BLOCK_BYTES: usize = size_of::<BlockQ8_1>();

    /// GGML has no `dequantize_row_q8_1`; this is the obvious one (`s` is redundant).
    fn dequantize_block(block: &[u8], out: &mut [f32]) {
        let b: &BlockQ8_1 = bytemuck::from_bytes(block);
        let d = f16_to_f32(b.d);
        for (o, &q) in out.iter_mut().zip(&b.qs) {
            *o = f32::from(q) * d;
        }
    }

    /// `quantize_row_q8_1_ref`: Q8_0's codes, then `s = sum(q) * d` with the unrounded `d`.
    fn quantize_block(x: &[f32], block: &mut [u8]) {
        let b: &mut BlockQ8_1 = bytemuck::from_bytes_mut(block);
        let d = quantize_q8(x, &mut b.qs);
        let sum: i32 = b.qs.iter().map(|&q| i32::from(q)).sum();
        b.d = f32_to_f16(d);
        b.s = f32_to_f16(sum as f32 * d);
    }

    fn dot_block(block: &[u8], x: &[f32]) -> f32 {
        let b: &BlockQ8_1 = bytemuck::from_bytes(block);
        let sum: f32 = b.qs.iter().zip(x).map(|(&q, &v)| f32::from(q) * v).sum();
        sum * f16_to_f32(b.d)
    }
}
