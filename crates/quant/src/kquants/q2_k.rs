//! Q2_K: 2-bit levels with a 4-bit scale and a 4-bit min per 16 weights; 2.625 bits per weight.

use bytemuck::{Pod, Zeroable};
use rullama_gguf::GgmlType;

use super::scales::{Qkx2Search, make_qkx2_quants};
use super::{QK_K, dequantize_sub_blocks, dot_sub_blocks, f16_to_f32, f32_to_f16};
use crate::num::nearest_int;
use crate::{BlockFormat, Format};

/// One Q2_K super-block (`block_q2_K`): weight `i` is `(d * sc) * q - dmin * m`, with `q` its
/// 2-bit level and `(sc, m)` the nibbles of `scales[i / 16]`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Pod, Zeroable)]
pub struct BlockQ2K {
    /// Per 16-weight sub-block: scale in the low nibble, min in the high nibble.
    pub scales: [u8; QK_K / 16],
    /// Four 2-bit levels per byte; its private `level` says which weight is where.
    pub qs: [u8; QK_K / 4],
    /// f16 factor of the sub-block scales.
    pub d: [u8; 2],
    /// f16 factor of the sub-block mins.
    pub dmin: [u8; 2],
}

const _: () = assert!(size_of::<BlockQ2K>() == GgmlType::Q2K.layout().type_size);

impl BlockQ2K {
    /// The 2-bit level of weight `i`. Each 128-weight half uses 32 bytes; byte `l` holds
    /// weights `l`, `l + 32`, `l + 64` and `l + 96` of that half, lowest bits first.
    fn level(&self, i: usize) -> u8 {
        let (half, r) = (i / 128, i % 128);
        (self.qs[32 * half + r % 32] >> (2 * (r / 32))) & 3
    }

    /// Scale and min of sub-block `s`, formed as GGML forms them (`d * sc`, `dmin * m`).
    pub(super) fn scale_min(&self, s: usize) -> (f32, f32) {
        let sc = self.scales[s];
        let dl = f16_to_f32(self.d) * (sc & 0xF) as f32;
        let ml = f16_to_f32(self.dmin) * (sc >> 4) as f32;
        (dl, ml)
    }

    /// The 16 weights of sub-block `s`: `dl * q - ml`, in GGML's operation order.
    fn decode(&self, s: usize, out: &mut [f32]) {
        let (dl, ml) = self.scale_min(s);
        for (k, y) in out.iter_mut().enumerate() {
            *y = dl * self.level(16 * s + k) as f32 - ml;
        }
    }
}

/// The Q2_K format.
#[derive(Debug, Clone, Copy)]
pub struct Q2K;

impl BlockFormat for Q2K {
    const FORMAT: Format = Format::Ggml(GgmlType::Q2K);
    const BLOCK_SIZE: usize = QK_K;
    const BLOCK_BYTES: usize = size_of::<BlockQ2K>();

    fn dequantize_block(block: &[u8], out: &mut [f32]) {
        let b: &BlockQ2K = bytemuck::from_bytes(block);
        dequantize_sub_blocks::<16>(out, |s, out| b.decode(s, out));
    }

    fn quantize_block(x: &[f32], block: &mut [u8]) {
        block.copy_from_slice(bytemuck::bytes_of(&quantize(x)));
    }

    fn dot_block(block: &[u8], x: &[f32]) -> f32 {
        let b: &BlockQ2K = bytemuck::from_bytes(block);
        dot_sub_blocks::<16>(x, |s, out| b.decode(s, out))
    }
}

/// `quantize_row_q2_K_ref` for one super-block.
fn quantize(x: &[f32]) -> BlockQ2K {
    // Scored by absolute error with |x| weights, over 16 grid densities from nmax - 0.5 up.
    const SEARCH: Qkx2Search = Qkx2Search {
        rmin: -0.5,
        rdelta: 0.1,
        nstep: 15,
        mad: true,
    };
    let mut levels = [0u8; QK_K];
    let mut scales = [0.0_f32; QK_K / 16];
    let mut mins = [0.0_f32; QK_K / 16];
    let (mut max_scale, mut max_min) = (0.0_f32, 0.0_f32);
    for (s, (x, levels)) in x
        .chunks_exact(16)
        .zip(levels.chunks_exact_mut(16))
        .enumerate()
    {
        let weights: [f32; 16] = std::array::from_fn(|k| x[k].abs());
        (scales[s], mins[s]) = make_qkx2_quants(3, x, &weights, levels, SEARCH);
        // Plain comparisons, not f32::max: they keep GGML's handling of NaN and -0.0.
        if scales[s] > max_scale {
            max_scale = scales[s];
        }
        if mins[s] > max_min {
            max_min = mins[s];
        }
    }

    let mut b = BlockQ2K::zeroed();
    // The 4-bit codes wrap into the byte as C's int -> uint8_t conversion does.
    if max_scale > 0.0 {
        let iscale = 15.0 / max_scale;
        for (code, &sc) in b.scales.iter_mut().zip(&scales) {
            *code = nearest_int(iscale * sc) as u8;
        }
        b.d = f32_to_f16(max_scale / 15.0);
    }
    if max_min > 0.0 {
        let iscale = 15.0 / max_min;
        for (code, &m) in b.scales.iter_mut().zip(&mins) {
            *code |= nearest_int(iscale * m).wrapping_shl(4) as u8;
        }
        b.dmin = f32_to_f16(max_min / 15.0);
    }

    // Requantize against the scales as stored, so the levels fit what the decoder will see.
    for (s, (x, levels)) in x
        .chunks_exact(16)
        .zip(levels.chunks_exact_mut(16))
        .enumerate()
    {
        let (d, m) = b.scale_min(s);
        if d == 0.0 {
            continue;
        }
        for (q, &v) in levels.iter_mut().zip(x) {
            *q = nearest_int((v + m) / d).clamp(0, 3) as u8;
        }
    }
    for (half, qs) in b.qs.chunks_exact_mut(32).enumerate() {
        let l = &levels[128 * half..];
        for (k, q) in qs.iter_mut().enumerate() {
            *q = l[k] | (l[k + 32] << 2) | (l[k + 64] << 4) | (l[k + 96] << 6);
        }
    }
    b
}
