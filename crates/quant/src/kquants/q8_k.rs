//! Q8_K: 8-bit signed levels with one f32 scale per 256 weights; 9.125 bits per weight.
//!
//! GGML uses it for the activations in its k-quant dot products, not for stored weights; the
//! per-16 sums `bsums` are there for those kernels and play no part in decoding.

use bytemuck::{Pod, Zeroable};
use rullama_gguf::GgmlType;

use super::{QK_K, dequantize_sub_blocks, dot_sub_blocks};
use crate::num::nearest_int;
use crate::{BlockFormat, Format};

/// One Q8_K block (`block_q8_K`): weight `i` is `d * qs[i]`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Pod, Zeroable)]
pub struct BlockQ8K {
    /// f32 scale, little-endian (kept as bytes so the struct has alignment 1).
    pub d: [u8; 4],
    /// The levels.
    pub qs: [i8; QK_K],
    /// Sum of each 16 levels, i16 little-endian.
    pub bsums: [[u8; 2]; QK_K / 16],
}

const _: () = assert!(size_of::<BlockQ8K>() == GgmlType::Q8K.layout().type_size);

impl BlockQ8K {
    /// Weights `16 * s ..` (16 of them; the grouping only matches the `bsums`).
    fn decode(&self, s: usize, out: &mut [f32]) {
        let d = f32::from_le_bytes(self.d);
        for (y, &q) in out.iter_mut().zip(&self.qs[16 * s..]) {
            *y = d * q as f32;
        }
    }
}

/// The Q8_K format.
#[derive(Debug, Clone, Copy)]
pub struct Q8K;

impl BlockFormat for Q8K {
    const FORMAT: Format = Format::Ggml(GgmlType::Q8K);
    const BLOCK_SIZE: usize = QK_K;
    const BLOCK_BYTES: usize = size_of::<BlockQ8K>();

    fn dequantize_block(block: &[u8], out: &mut [f32]) {
        let b: &BlockQ8K = bytemuck::from_bytes(block);
        dequantize_sub_blocks::<16>(out, |s, out| b.decode(s, out));
    }

    fn quantize_block(x: &[f32], block: &mut [u8]) {
        block.copy_from_slice(bytemuck::bytes_of(&quantize(x)));
    }

    fn dot_block(block: &[u8], x: &[f32]) -> f32 {
        let b: &BlockQ8K = bytemuck::from_bytes(block);
        dot_sub_blocks::<16>(x, |s, out| b.decode(s, out))
    }
}

/// `quantize_row_q8_K_ref` for one block.
fn quantize(x: &[f32]) -> BlockQ8K {
    let (mut amax, mut max) = (0.0_f32, 0.0_f32);
    for &v in x {
        if v.abs() > amax {
            amax = v.abs();
            max = v;
        }
    }
    let mut b = BlockQ8K::zeroed();
    if amax == 0.0 {
        return b;
    }
    // GGML moved from -128 to -127 for its IQ2_XXS SIMD kernels; levels stay in -127..=127.
    let iscale = -127.0 / max;
    for (q, &v) in b.qs.iter_mut().zip(x) {
        *q = nearest_int(iscale * v).min(127) as i8;
    }
    for (sum, qs) in b.bsums.iter_mut().zip(b.qs.chunks_exact(16)) {
        *sum = qs.iter().map(|&q| q as i16).sum::<i16>().to_le_bytes();
    }
    b.d = (1.0 / iscale).to_le_bytes();
    b
}
