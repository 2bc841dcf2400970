//! Q8_0: 32 weights as signed bytes, one f16 scale.

use bytemuck::{Pod, Zeroable};
use rullama_gguf::GgmlType;

use crate::format::{BlockFormat, Format};
use crate::num::{f16_to_f32, f32_to_f16};

/// `w[j] = d * qs[j]`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Pod, Zeroable)]
pub struct BlockQ8_0 {
    /// The scale `d`, f16 bits.
    pub d: [u8; 2],
    /// The 8-bit codes.
    pub qs: [i8; 32],
}

const _: () = assert!(size_of::<BlockQ8_0>() == 34);

/// `d = max|x| / 127`, `q = round(x / d)` (half away from zero), as `quantize_row_q8_0_ref`.
/// Returns the unrounded `d` (Q8_1 needs it for its sum).
pub(crate) fn quantize_q8(x: &[f32], qs: &mut [i8; 32]) -> f32 {
    // C's `MAX(amax, fabsf(v))`, NaN handling included.
    let amax = x
        .iter()
        .fold(0.0f32, |a, v| if a > v.abs() { a } else { v.abs() });
    let d = amax / 127.0;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    for (q, &v) in qs.iter_mut().zip(x) {
        *q = (v * id).round() as i8;
    }
    d
}

/// The Q8_0 format.
#[derive(Debug, Clone, Copy)]
pub struct Q8_0;

impl BlockFormat for Q8_0 {
    const FORMAT: Format = Format::Ggml(GgmlType::Q8_0);
    const BLOCK_SIZE: usize = 32;
    const BLOCK_BYTES: usize = size_of::<BlockQ8_0>();

    fn dequantize_block(block: &[u8], out: &mut [f32]) {
        let b: &BlockQ8_0 = bytemuck::from_bytes(block);
        let d = f16_to_f32(b.d);
        for (o, &q) in out.iter_mut().zip(&b.qs) {
            *o = f32::from(q) * d;
        }
    }

    fn quantize_block(x: &[f32], block: &mut [u8]) {
        let b: &mut BlockQ8_0 = bytemuck::from_bytes_mut(block);
        b.d = f32_to_f16(quantize_q8(x, &mut b.qs));
    }

    fn dot_block(block: &[u8], x: &[f32]) -> f32 {
        let b: &BlockQ8_0 = bytemuck::from_bytes(block);
        let sum: f32 = b.qs.iter().zip(x).map(|(&q, &v)| f32::from(q) * v).sum();
        sum * f16_to_f32(b.d)
    }
}
