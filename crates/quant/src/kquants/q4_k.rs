//! Q4_K: 4-bit levels with a 6-bit scale and a 6-bit min per 32 weights; 4.5 bits per weight.

use bytemuck::{Pod, Zeroable};
use rullama_gguf::GgmlType;

use super::scales::{Qkx2Search, decode_k4, quantize_k4, scale_min_k4};
use super::{QK_K, dequantize_sub_blocks, dot_sub_blocks};
use crate::{BlockFormat, Format};

/// One Q4_K super-block (`block_q4_K`): weight `i` is `d * sc * q - dmin * m`, with `q` its
/// 4-bit level and `(sc, m)` the 6-bit pair of sub-block `i / 32`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Pod, Zeroable)]
pub struct BlockQ4K {
    /// f16 factor of the sub-block scales.
    pub d: [u8; 2],
    /// f16 factor of the sub-block mins.
    pub dmin: [u8; 2],
    /// Eight 6-bit scales and eight 6-bit mins, packed as `get_scale_min_k4` reads them.
    pub scales: [u8; 12],
    /// Two levels per byte: each 64 weights take 32 bytes, the first 32 in the low nibbles.
    pub qs: [u8; QK_K / 2],
}

const _: () = assert!(size_of::<BlockQ4K>() == GgmlType::Q4K.layout().type_size);

impl BlockQ4K {
    /// The 4-bit level of weight `i`.
    fn level(&self, i: usize) -> u8 {
        let s = i / 32;
        (self.qs[32 * (s / 2) + i % 32] >> (4 * (s % 2))) & 0xF
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

/// The Q4_K format.
#[derive(Debug, Clone, Copy)]
pub struct Q4K;

impl BlockFormat for Q4K {
    const FORMAT: Format = Format::Ggml(GgmlType::Q4K);
    const BLOCK_SIZE: usize = QK_K;
    const BLOCK_BYTES: usize = size_of::<BlockQ4K>();

    fn dequantize_block(block: &[u8], out: &mut [f32]) {
        let b: &BlockQ4K = bytemuck::from_bytes(block);
        dequantize_sub_blocks::<32>(out, |s, out| b.decode(s, out));
    }

    fn quantize_block(x: &[f32], block: &mut [u8]) {
        // Squared error, 21 grid densities from nmax - 1 up.
        const SEARCH: Qkx2Search = Qkx2Search {
            rmin: -1.0,
            rdelta: 0.1,
            nstep: 20,
            mad: false,
        };
        let k = quantize_k4(x, 15, SEARCH);
        let mut b = BlockQ4K {
            d: k.d,
            dmin: k.dmin,
            scales: k.scales,
            qs: [0; QK_K / 2],
        };
        for (c, qs) in b.qs.chunks_exact_mut(32).enumerate() {
            let l = &k.levels[64 * c..];
            for (j, q) in qs.iter_mut().enumerate() {
                *q = l[j] | (l[j + 32] << 4);
            }
        }
        block.copy_from_slice(bytemuck::bytes_of(&b));
    }

    fn dot_block(block: &[u8], x: &[f32]) -> f32 {
        let b: &BlockQ4K = bytemuck::from_bytes(block);
        dot_sub_blocks::<32>(x, |s, out| b.decode(s, out))
    }
}
