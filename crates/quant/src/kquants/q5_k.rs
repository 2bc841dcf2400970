//! Q5_K: 5-bit levels with a 6-bit scale and a 6-bit min per 32 weights; 5.5 bits per weight.

use bytemuck::{Pod, Zeroable};
use rullama_gguf::GgmlType;

use super::scales::{Qkx2Search, decode_k4, quantize_k4, scale_min_k4};
use super::{QK_K, dequantize_sub_blocks, dot_sub_blocks};
use crate::{BlockFormat, Format};

/// One Q5_K super-block (`block_q5_K`): Q4_K's layout plus a fifth bit per weight.
#[repr(C)]
#[derive(Debug, Clone, Copy, Pod, Zeroable)]
pub struct BlockQ5K {
    /// f16 factor of the sub-block scales.
    pub d: [u8; 2],
    /// f16 factor of the sub-block mins.
    pub dmin: [u8; 2],
    /// Eight 6-bit scales and eight 6-bit mins, packed as in Q4_K.
    pub scales: [u8; 12],
    /// Fifth bit of each level: byte `l` bit `s` belongs to weight `32 * s + l`.
    pub qh: [u8; QK_K / 8],
    /// Low four bits of each level, laid out as Q4_K's `qs`.
    pub qs: [u8; QK_K / 2],
}

const _: () = assert!(size_of::<BlockQ5K>() == GgmlType::Q5K.layout().type_size);

impl BlockQ5K {
    /// The 5-bit level of weight `i`.
    fn level(&self, i: usize) -> u8 {
        let (s, l) = (i / 32, i % 32);
        let low = (self.qs[32 * (s / 2) + l] >> (4 * (s % 2))) & 0xF;
        let high = (self.qh[l] >> s) & 1;
        low | (high << 4)
    }

    /// Scale and min of sub-block `s`, formed as GGML forms them (`d * sc`, `dmin * m`).
    pub(super) fn scale_min(&self, s: usize) -> (f32, f32) {
        scale_min_k4(self.d, self.dmin, &self.scales, s)
    }

    /// The 32 weights of sub-block `s`: `dl * q - ml`, in GGML's operation order.
    fn decode(&self, s: usize, out: &mut [f32]) {
        decode_k4(self.scale_min(s), |i| self.level(i), s, out);
    }
}

/// The Q5_K format.
#[derive(Debug, Clone, Copy)]
pub struct Q5K;

impl BlockFormat for Q5K {
    const FORMAT: Format = Format::Ggml(GgmlType::Q5K);
    const BLOCK_SIZE: usize = QK_K;
    const BLOCK_BYTES: usize = size_of::<BlockQ5K>();

    fn dequantize_block(block: &[u8], out: &mut [f32]) {
        let b: &BlockQ5K = bytemuck::from_bytes(block);
        dequantize_sub_blocks::<32>(out, |s, out| b.decode(s, out));
    }

    fn quantize_block(x: &[f32], block: &mut [u8]) {
        // Squared error, 16 grid densities from nmax - 0.5 up.
        const SEARCH: Qkx2Search = Qkx2Search {
            rmin: -0.5,
            rdelta: 0.1,
            nstep: 15,
            mad: false,
        };
        let k = quantize_k4(x, 31, SEARCH);
        let mut b = BlockQ5K::zeroed();
        (b.d, b.dmin, b.scales) = (k.d, k.dmin, k.scales);
        for (i, &l) in k.levels.iter().enumerate() {
            let (s, j) = (i / 32, i % 32);
            b.qs[32 * (s / 2) + j] |= (l & 0xF) << (4 * (s % 2));
            b.qh[j] |= (l >> 4) << s;
        }
        block.copy_from_slice(bytemuck::bytes_of(&b));
    }

    fn dot_block(block: &[u8], x: &[f32]) -> f32 {
        let b: &BlockQ5K = bytemuck::from_bytes(block);
        dot_sub_blocks::<32>(x, |s, out| b.decode(s, out))
    }
}
