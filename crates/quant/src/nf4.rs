//! NF4 (QLoRA's 4-bit NormalFloat): 64 weights as indices into a 16-value codebook, one f32
//! absmax scale. Not a GGUF type; used to hold a frozen base model in memory.

use bytemuck::{Pod, Zeroable};

use crate::format::{BlockFormat, Format};

/// The NormalFloat codebook (bitsandbytes): quantiles of a standard normal, scaled to [-1, 1],
/// with an exact zero.
pub const NF4_CODEBOOK: [f32; 16] = [
    -1.0,
    -0.696_192_8,
    -0.525_073_05,
    -0.394_917_5,
    -0.284_441_38,
    -0.184_773_43,
    -0.091_050_036,
    0.0,
    0.079_580_3,
    0.160_930_2,
    0.246_112_3,
    0.337_915_24,
    0.440_709_83,
    0.562_617,
    0.722_956_84,
    1.0,
];

/// `w[i] = absmax * NF4_CODEBOOK[q[i]]`; byte `j` holds weight `2j` in its low nibble and
/// weight `2j + 1` in its high nibble. `absmax` is a little-endian f32.
#[repr(C)]
#[derive(Debug, Clone, Copy, Pod, Zeroable)]
pub struct BlockNf4 {
    /// The block's largest magnitude, f32 bits.
    pub absmax: [u8; 4],
    /// Two 4-bit codebook indices a byte.
    pub qs: [u8; 32],
}

const _: () = assert!(size_of::<BlockNf4>() == 36);

/// The index of the codebook entry nearest to `v` (the lower one on ties; NaN gives 0).
fn nearest_code(v: f32) -> u8 {
    let mut best = 0;
    for (i, &c) in NF4_CODEBOOK.iter().enumerate().skip(1) {
        if (c - v).abs() < (NF4_CODEBOOK[best] - v).abs() {
            best = i;
        }
    }
    best as u8
}

/// The NF4 format.
#[derive(Debug, Clone, Copy)]
pub struct Nf4;

impl BlockFormat for Nf4 {
    const FORMAT: Format = Format::Nf4;
    const BLOCK_SIZE: usize = 64;
    const BLOCK_BYTES: usize = size_of::<BlockNf4>();

    fn dequantize_block(block: &[u8], out: &mut [f32]) {
        let b: &BlockNf4 = bytemuck::from_bytes(block);
        let absmax = f32::from_le_bytes(b.absmax);
        for (pair, &q) in out.chunks_exact_mut(2).zip(&b.qs) {
            pair[0] = NF4_CODEBOOK[usize::from(q & 0x0f)] * absmax;
            pair[1] = NF4_CODEBOOK[usize::from(q >> 4)] * absmax;
        }
    }

    /// `absmax = max |x|`, then each `x / absmax` goes to its nearest codebook entry. An
    /// all-zero block stores absmax 0 and the index of 0.0.
    fn quantize_block(x: &[f32], block: &mut [u8]) {
        let absmax = x.iter().fold(0.0f32, |a, v| a.max(v.abs()));
        let code = |v: f32| {
            if absmax > 0.0 {
                nearest_code(v / absmax)
            } else {
                7
            }
        };
        let b: &mut BlockNf4 = bytemuck::from_bytes_mut(block);
        b.absmax = absmax.to_le_bytes();
        for (q, pair) in b.qs.iter_mut().zip(x.chunks_exact(2)) {
            *q = code(pair[0]) | (code(pair[1]) << 4);
        }
    }

    fn dot_block(block: &[u8], x: &[f32]) -> f32 {
        let b: &BlockNf4 = bytemuck::from_bytes(block);
        let mut sum = 0.0f32;
        for (pair, &q) in x.chunks_exact(2).zip(&b.qs) {
            sum += NF4_CODEBOOK[usize::from(q & 0x0f)] * pair[0];
            sum += NF4_CODEBOOK[usize::from(q >> 4)] * pair[1];
        }
        sum * f32::from_le_bytes(b.absmax)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codebook_is_bitsandbytes_exactly() {
        // The values as bitsandbytes prints them (f32 values shown in double precision).
        let published = [
            -1.0,
            -0.6961928009986877,
            -0.5250730514526367,
            -0.39491748809814453,
            -0.28444138169288635,
            -0.18477343022823334,
            -0.09105003625154495,
            0.0,
            0.07958029955625534,
            0.16093020141124725,
            0.24611230194568634,
            0.33791524171829224,
            0.44070982933044434,
            0.5626170039176941,
            0.7229568362236023,
            1.0,
        ];
        for (i, (&c, &p)) in NF4_CODEBOOK.iter().zip(&published).enumerate() {
            assert_eq!(f64::from(c), p, "entry {i}");
        }
    }

    #[test]
    fn nearest_code_splits_at_midpoints() {
        for i in 0..15 {
            let mid = (NF4_CODEBOOK[i] + NF4_CODEBOOK[i + 1]) / 2.0;
            assert_eq!(nearest_code(mid - 1e-6), i as u8);
            assert_eq!(nearest_code(mid + 1e-6), i as u8 + 1);
        }
    }
}
