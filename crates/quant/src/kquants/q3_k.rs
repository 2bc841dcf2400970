//! Q3_K: 3-bit signed levels with a 6-bit signed scale per 16 weights; 3.4375 bits per weight.

use bytemuck::{Pod, Zeroable};
use rullama_gguf::GgmlType;

use super::scales::make_q3_quants;
use super::{QK_K, dequantize_sub_blocks, dot_sub_blocks, f16_to_f32, f32_to_f16};
use crate::num::nearest_int;
use crate::{BlockFormat, Format};

/// One Q3_K super-block (`block_q3_K`): weight `i` is `(d * (sc - 32)) * q` with `q` in
/// `-4..=3` and `sc` the 6-bit scale of sub-block `i / 16`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Pod, Zeroable)]
pub struct BlockQ3K {
    /// Third bit of each level, inverted: set means `q = low`, clear means `q = low - 4`.
    /// Byte `l` bit `k` belongs to weight `32 * k + l`.
    pub hmask: [u8; QK_K / 8],
    /// Low two bits of each level, laid out as Q2_K's `qs`.
    pub qs: [u8; QK_K / 4],
    /// Sixteen 6-bit scales (stored with an offset of 32): low nibbles in bytes 0-7 (scales
    /// 0-7 in the low nibble, 8-15 in the high), top two bits in bytes 8-11.
    pub scales: [u8; 12],
    /// f16 factor of the sub-block scales.
    pub d: [u8; 2],
}

const _: () = assert!(size_of::<BlockQ3K>() == GgmlType::Q3K.layout().type_size);

impl BlockQ3K {
    /// The signed level (`-4..=3`) of weight `i`.
    fn level(&self, i: usize) -> i32 {
        let (half, r) = (i / 128, i % 128);
        let low = (self.qs[32 * half + r % 32] >> (2 * (r / 32))) & 3;
        let high = (self.hmask[i % 32] >> (i / 32)) & 1;
        low as i32 - if high == 1 { 0 } else { 4 }
    }

    /// Scale of sub-block `s`, `d * (sc - 32)` as GGML forms it.
    pub(super) fn scale(&self, s: usize) -> f32 {
        f16_to_f32(self.d) * (unpack_scale(&self.scales, s) - 32) as f32
    }

    /// The 16 weights of sub-block `s`: `dl * q`.
    fn decode(&self, s: usize, out: &mut [f32]) {
        let dl = self.scale(s);
        for (k, y) in out.iter_mut().enumerate() {
            *y = dl * self.level(16 * s + k) as f32;
        }
    }
}

/// The 6-bit code of scale `j` from the 12 packed bytes.
fn unpack_scale(packed: &[u8; 12], j: usize) -> i32 {
    let low = if j < 8 {
        packed[j] & 0xF
    } else {
        packed[j - 8] >> 4
    };
    let high = (packed[8 + j % 4] >> (2 * (j / 4))) & 3;
    (low | (high << 4)) as i32
}

/// The inverse of [`unpack_scale`] for sixteen 6-bit codes.
fn pack_scales(codes: &[u8; 16]) -> [u8; 12] {
    let mut packed = [0u8; 12];
    for (j, &code) in codes.iter().enumerate() {
        if j < 8 {
            packed[j] = code & 0xF;
        } else {
            packed[j - 8] |= (code & 0xF) << 4;
        }
        packed[8 + j % 4] |= (code >> 4) << (2 * (j / 4));
    }
    packed
}

/// The Q3_K format.
#[derive(Debug, Clone, Copy)]
pub struct Q3K;

impl BlockFormat for Q3K {
    const FORMAT: Format = Format::Ggml(GgmlType::Q3K);
    const BLOCK_SIZE: usize = QK_K;
    const BLOCK_BYTES: usize = size_of::<BlockQ3K>();

    fn dequantize_block(block: &[u8], out: &mut [f32]) {
        let b: &BlockQ3K = bytemuck::from_bytes(block);
        dequantize_sub_blocks::<16>(out, |s, out| b.decode(s, out));
    }

    fn quantize_block(x: &[f32], block: &mut [u8]) {
        block.copy_from_slice(bytemuck::bytes_of(&quantize(x)));
    }

    fn dot_block(block: &[u8], x: &[f32]) -> f32 {
        let b: &BlockQ3K = bytemuck::from_bytes(block);
        dot_sub_blocks::<16>(x, |s, out| b.decode(s, out))
    }
}

/// `quantize_row_q3_K_ref` for one super-block.
fn quantize(x: &[f32]) -> BlockQ3K {
    // Levels with an offset of 4 (0..=7) until packing.
    let mut levels = [0i8; QK_K];
    let mut scales = [0.0_f32; QK_K / 16];
    let (mut amax, mut max_scale) = (0.0_f32, 0.0_f32);
    for (s, (x, levels)) in x
        .chunks_exact(16)
        .zip(levels.chunks_exact_mut(16))
        .enumerate()
    {
        scales[s] = make_q3_quants(4, x, levels);
        if scales[s].abs() > amax {
            amax = scales[s].abs();
            max_scale = scales[s];
        }
    }

    let mut b = BlockQ3K::zeroed();
    if max_scale != 0.0 {
        // The sub-block with the largest scale gets code -32; the rest are rounded onto
        // the same grid. The `as i8` is C's int -> int8_t conversion (wrapping).
        let iscale = -32.0 / max_scale;
        let codes = scales.map(|sc| ((nearest_int(iscale * sc) as i8).clamp(-32, 31) + 32) as u8);
        b.scales = pack_scales(&codes);
        b.d = f32_to_f16(1.0 / iscale);
    }

    for (s, (x, levels)) in x
        .chunks_exact(16)
        .zip(levels.chunks_exact_mut(16))
        .enumerate()
    {
        let d = b.scale(s);
        if d == 0.0 {
            continue;
        }
        for (q, &v) in levels.iter_mut().zip(x) {
            *q = (nearest_int(v / d).clamp(-4, 3) + 4) as i8;
        }
    }

    // The third bit goes to `hmask` (weight j: byte j % 32, bit j / 32); two bits stay.
    for (j, q) in levels.iter_mut().enumerate() {
        if *q > 3 {
            b.hmask[j % 32] |= 1 << (j / 32);
            *q -= 4;
        }
    }
    let levels = levels.map(|q| q as u8);
    for (half, qs) in b.qs.chunks_exact_mut(32).enumerate() {
        let l = &levels[128 * half..];
        for (k, q) in qs.iter_mut().enumerate() {
            *q = l[k] | (l[k + 32] << 2) | (l[k + 64] << 4) | (l[k + 96] << 6);
        }
    }
    b
}
