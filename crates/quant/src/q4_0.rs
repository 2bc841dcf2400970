//! Q4_0: 32 weights as 4-bit codes around 8, one f16 scale.

use bytemuck::{Pod, Zeroable};
use rullama_gguf::GgmlType;

use crate::format::{BlockFormat, Format};
use crate::num::{f16_to_f32, f32_to_f16, trunc_code};

/// `w[j] = d * (q[j] - 8)`; byte `j` of `qs` holds weight `j` in its low nibble and weight
/// `j + 16` in its high nibble.
#[repr(C)]
#[derive(Debug, Clone, Copy, Pod, Zeroable)]
pub struct BlockQ4_0 {
    /// The scale `d`, f16 bits.
    pub d: [u8; 2],
    /// Two 4-bit codes a byte.
    pub qs: [u8; 16],
}

const _: () = assert!(size_of::<BlockQ4_0>() == 18);

/// The Q4_0 format.
#[derive(Debug, Clone, Copy)]
pub struct Q4_0;

impl BlockFormat for Q4_0 {
    const FORMAT: Format = Format::Ggml(GgmlType::Q4_0);
    const BLOCK_SIZE: usize = 32;
    const BLOCK_BYTES: usize = size_of::<BlockQ4_0>();

    fn dequantize_block(block: &[u8], out: &mut [f32]) {
        let b: &BlockQ4_0 = bytemuck::from_bytes(block);
        let d = f16_to_f32(b.d);
        for (j, &q) in b.qs.iter().enumerate() {
            out[j] = (i32::from(q & 0x0f) - 8) as f32 * d;
            out[j + 16] = (i32::from(q >> 4) - 8) as f32 * d;
        }
    }

    /// `quantize_row_q4_0_ref`: the value of largest magnitude (first one on ties) maps to
    /// code 0, so `d = max / -8`; the others round half up and clamp to 15.
    fn quantize_block(x: &[f32], block: &mut [u8]) {
        let (mut amax, mut max) = (0.0f32, 0.0f32);
        for &v in x {
            if amax < v.abs() {
                amax = v.abs();
                max = v;
            }
        }
        let d = max / -8.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        let b: &mut BlockQ4_0 = bytemuck::from_bytes_mut(block);
        b.d = f32_to_f16(d);
        for (j, q) in b.qs.iter_mut().enumerate() {
            let lo = trunc_code(x[j] * id + 8.5, 15);
            let hi = trunc_code(x[j + 16] * id + 8.5, 15);
            *q = lo | (hi << 4);
        }
    }

    fn dot_block(block: &[u8], x: &[f32]) -> f32 {
        let b: &BlockQ4_0 = bytemuck::from_bytes(block);
        let mut sum = 0.0f32;
        for (j, &q) in b.qs.iter().enumerate() {
            sum += (i32::from(q & 0x0f) - 8) as f32 * x[j];
            sum += (i32::from(q >> 4) - 8) as f32 * x[j + 16];
        }
        sum * f16_to_f32(b.d)
    }
}
