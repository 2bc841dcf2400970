//! Q1_0_g128: 128 weights as sign bits, one f16 scale (OxiBonsai's 1-bit models; GGUF id 41).

use bytemuck::{Pod, Zeroable};
use rullama_gguf::GgmlType;

use crate::format::{BlockFormat, Format};
use crate::num::{f16_to_f32, f32_to_f16};

/// `w[i] = +d` when bit `i` is set, else `-d`; bit `i` is `qs[i / 8] >> (i % 8) & 1`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Pod, Zeroable)]
pub struct BlockQ1_0G128 {
    /// The scale `d`, f16 bits.
    pub d: [u8; 2],
    /// 128 sign bits, least significant first.
    pub qs: [u8; 16],
}

const _: () = assert!(size_of::<BlockQ1_0G128>() == 18);

impl BlockQ1_0G128 {
    fn bit(&self, i: usize) -> bool {
        self.qs[i / 8] >> (i % 8) & 1 == 1
    }
}

/// The Q1_0_g128 format.
#[derive(Debug, Clone, Copy)]
pub struct Q1_0G128;

impl BlockFormat for Q1_0G128 {
    const FORMAT: Format = Format::Ggml(GgmlType::Q1_0G128);
    const BLOCK_SIZE: usize = 128;
    const BLOCK_BYTES: usize = size_of::<BlockQ1_0G128>();

    fn dequantize_block(block: &[u8], out: &mut [f32]) {
        let b: &BlockQ1_0G128 = bytemuck::from_bytes(block);
        let d = f16_to_f32(b.d);
        for (i, o) in out.iter_mut().enumerate() {
            *o = if b.bit(i) { d } else { -d };
        }
    }

    /// `quantize_row_q1_0_ref`: `d = mean |x|` (for fixed signs, the scale minimising the L1
    /// error); bit set for `x >= 0` (so -0.0 and 0.0 both give `+d`, NaN gives `-d`).
    fn quantize_block(x: &[f32], block: &mut [u8]) {
        let sum_abs: f32 = x.iter().fold(0.0, |s, v| s + v.abs());
        let b: &mut BlockQ1_0G128 = bytemuck::from_bytes_mut(block);
        b.d = f32_to_f16(sum_abs / 128.0);
        b.qs = [0; 16];
        for (i, &v) in x.iter().enumerate() {
            if v >= 0.0 {
                b.qs[i / 8] |= 1 << (i % 8);
            }
        }
    }

    fn dot_block(block: &[u8], x: &[f32]) -> f32 {
        let b: &BlockQ1_0G128 = bytemuck::from_bytes(block);
        let sum: f32 = x
            .iter()
            .enumerate()
            .map(|(i, &v)| if b.bit(i) { v } else { -v })
            .sum();
        sum * f16_to_f32(b.d)
    }
}
