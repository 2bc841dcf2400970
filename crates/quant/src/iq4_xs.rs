//! IQ4_XS: IQ4_NL's grid over a 256-weight super-block, with a 6-bit scale per 32 weights.

use bytemuck::{Pod, Zeroable};
use rullama_gguf::GgmlType;

use crate::format::{BlockFormat, Format};
use crate::iq4_nl::{best_index, fit_block, grid_dequantize, grid_dot};
use crate::num::{f16_to_f32, f32_to_f16, nearest_int};

/// Sub-block `ib` (32 weights) has scale `d * (ls - 32)` where the 6-bit `ls` is nibble `ib % 2`
/// of `scales_l[ib / 2]` (low four bits) joined with bits `2 ib, 2 ib + 1` of the little-endian
/// u16 `scales_h` (high two bits). Its codes are `qs[16 ib..16 ib + 16]`, ordered as in IQ4_NL.
#[repr(C)]
#[derive(Debug, Clone, Copy, Pod, Zeroable)]
pub struct BlockIq4Xs {
    /// The super-block scale `d`, f16 bits.
    pub d: [u8; 2],
    /// The high two bits of the eight sub-block scales.
    pub scales_h: [u8; 2],
    /// The low four bits of the eight sub-block scales.
    pub scales_l: [u8; 4],
    /// Two 4-bit grid indices a byte, 16 bytes a sub-block.
    pub qs: [u8; 128],
}

const _: () = assert!(size_of::<BlockIq4Xs>() == 136);

impl BlockIq4Xs {
    /// The scale of sub-block `ib`.
    fn sub_scale(&self, ib: usize) -> f32 {
        let low = (self.scales_l[ib / 2] >> (4 * (ib % 2))) & 0x0f;
        let high = (u16::from_le_bytes(self.scales_h) >> (2 * ib)) as u8 & 0x03;
        f16_to_f32(self.d) * (i32::from(low | (high << 4)) - 32) as f32
    }
}

/// The IQ4_XS format.
#[derive(Debug, Clone, Copy)]
pub struct Iq4Xs;

impl BlockFormat for Iq4Xs {
    const FORMAT: Format = Format::Ggml(GgmlType::Iq4Xs);
    const BLOCK_SIZE: usize = 256;
    const BLOCK_BYTES: usize = size_of::<BlockIq4Xs>();

    fn dequantize_block(block: &[u8], out: &mut [f32]) {
        let b: &BlockIq4Xs = bytemuck::from_bytes(block);
        for (ib, out) in out.chunks_exact_mut(32).enumerate() {
            grid_dequantize(&b.qs[16 * ib..16 * ib + 16], b.sub_scale(ib), out);
        }
    }

    /// `quantize_iq4_xs` without importance weights: fit each 32-weight sub-block with the
    /// scale search (`ntry = 7`), quantize the eight scales to 6 bits against
    /// `d = -max_scale / 32`, then choose every index again against its rounded scale.
    fn quantize_block(x: &[f32], block: &mut [u8]) {
        let mut codes = [0u8; 256];
        let mut scales = [0.0f32; 8];
        let (mut max_scale, mut amax_scale) = (0.0f32, 0.0f32);
        for (ib, s) in scales.iter_mut().enumerate() {
            *s = fit_block(
                &x[32 * ib..32 * ib + 32],
                7,
                &mut codes[32 * ib..32 * ib + 32],
            );
            if s.abs() > amax_scale {
                amax_scale = s.abs();
                max_scale = *s;
            }
        }
        let d = -max_scale / 32.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        let b: &mut BlockIq4Xs = bytemuck::from_bytes_mut(block);
        *b = BlockIq4Xs::zeroed();
        b.d = f32_to_f16(d);
        let mut scales_h = 0u16;
        for (ib, &s) in scales.iter().enumerate() {
            let l = nearest_int(id * s).clamp(-32, 31);
            let dl = d * l as f32;
            let idl = if dl != 0.0 { 1.0 / dl } else { 0.0 };
            for (c, &v) in codes[32 * ib..32 * ib + 32].iter_mut().zip(&x[32 * ib..]) {
                *c = best_index(idl * v);
            }
            let l = (l + 32) as u8;
            b.scales_l[ib / 2] |= (l & 0x0f) << (4 * (ib % 2));
            scales_h |= u16::from(l >> 4) << (2 * ib);
        }
        b.scales_h = scales_h.to_le_bytes();
        for (ib, qs) in b.qs.chunks_exact_mut(16).enumerate() {
            for (j, q) in qs.iter_mut().enumerate() {
                *q = codes[32 * ib + j] | (codes[32 * ib + 16 + j] << 4);
            }
        }
    }

    fn dot_block(block: &[u8], x: &[f32]) -> f32 {
        let b: &BlockIq4Xs = bytemuck::from_bytes(block);
        (0..8)
            .map(|ib| b.sub_scale(ib) * grid_dot(&b.qs[16 * ib..16 * ib + 16], &x[32 * ib..]))
            .sum()
    }
}
