//! Q6_K: 6-bit signed levels with an 8-bit signed scale per 16 weights; 6.5625 bits per weight.

use bytemuck::{Pod, Zeroable};
use rullama_gguf::GgmlType;

use super::scales::make_qx_quants;
use super::{QK_K, dequantize_sub_blocks, dot_sub_blocks, f16_to_f32, f32_to_f16};
use crate::num::nearest_int;
use crate::{BlockFormat, Format};

/// Below this largest sub-block scale the whole super-block is stored as zeros
/// (`GROUP_MAX_EPS` in `quantize_row_q6_K_ref`).
const ZERO_EPS: f32 = 1e-15;

/// One Q6_K super-block (`block_q6_K`): weight `i` is `d * scales[i / 16] * q` with `q` in
/// `-32..=31`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Pod, Zeroable)]
pub struct BlockQ6K {
    /// Low four bits of each level (offset by 32). Per 128-weight half, 64 bytes: byte `l`
    /// holds weights `l` (low nibble) and `l + 64` (high); byte `l + 32` holds `l + 32` and
    /// `l + 96`.
    pub ql: [u8; QK_K / 2],
    /// Top two bits of each level: per half, byte `l` holds weights `l`, `l + 32`, `l + 64`,
    /// `l + 96`, lowest bits first.
    pub qh: [u8; QK_K / 4],
    /// One signed 8-bit scale per 16 weights.
    pub scales: [i8; QK_K / 16],
    /// f16 factor of the sub-block scales.
    pub d: [u8; 2],
}

const _: () = assert!(size_of::<BlockQ6K>() == GgmlType::Q6K.layout().type_size);

impl BlockQ6K {
    /// The signed level (`-32..=31`) of weight `i`.
    fn level(&self, i: usize) -> i32 {
        let (half, r) = (i / 128, i % 128);
        let (k, l) = (r / 32, r % 32);
        let low = (self.ql[64 * half + 32 * (k % 2) + l] >> (4 * (k / 2))) & 0xF;
        let high = (self.qh[32 * half + l] >> (2 * k)) & 3;
        (low | (high << 4)) as i32 - 32
    }

    /// Scale of sub-block `s`, `d * scales[s]` as GGML forms it.
    pub(super) fn scale(&self, s: usize) -> f32 {
        f16_to_f32(self.d) * self.scales[s] as f32
    }

    /// The 16 weights of sub-block `s`: GGML multiplies left to right, `(d * scale) * q`.
    fn decode(&self, s: usize, out: &mut [f32]) {
        let dl = self.scale(s);
        for (k, y) in out.iter_mut().enumerate() {
            *y = dl * self.level(16 * s + k) as f32;
        }
    }
}

/// The Q6_K format.
#[derive(Debug, Clone, Copy)]
pub struct Q6K;

impl BlockFormat for Q6K {
    const FORMAT: Format = Format::Ggml(GgmlType::Q6K);
    const BLOCK_SIZE: usize = QK_K;
    const BLOCK_BYTES: usize = size_of::<BlockQ6K>();

    fn dequantize_block(block: &[u8], out: &mut [f32]) {
        let b: &BlockQ6K = bytemuck::from_bytes(block);
        dequantize_sub_blocks::<16>(out, |s, out| b.decode(s, out));
    }

    fn quantize_block(x: &[f32], block: &mut [u8]) {
        block.copy_from_slice(bytemuck::bytes_of(&quantize(x)));
    }

    fn dot_block(block: &[u8], x: &[f32]) -> f32 {
        let b: &BlockQ6K = bytemuck::from_bytes(block);
        dot_sub_blocks::<16>(x, |s, out| b.decode(s, out))
    }
}

/// `quantize_row_q6_K_ref` for one super-block.
fn quantize(x: &[f32]) -> BlockQ6K {
    // Levels with an offset of 32 (0..=63) until packing.
    let mut levels = [0i8; QK_K];
    let mut scales = [0.0_f32; QK_K / 16];
    let (mut max_abs, mut max_scale) = (0.0_f32, 0.0_f32);
    for (s, (x, levels)) in x
        .chunks_exact(16)
        .zip(levels.chunks_exact_mut(16))
        .enumerate()
    {
        scales[s] = make_qx_quants(32, x, levels);
        if scales[s].abs() > max_abs {
            max_abs = scales[s].abs();
            max_scale = scales[s];
        }
    }
    let mut b = BlockQ6K::zeroed();
    if max_abs < ZERO_EPS {
        return b;
    }

    // The sub-block with the largest scale gets -128; the others share its grid.
    let iscale = -128.0 / max_scale;
    b.d = f32_to_f16(1.0 / iscale);
    b.scales = scales.map(|sc| nearest_int(iscale * sc).min(127) as i8);
    for (s, (x, levels)) in x
        .chunks_exact(16)
        .zip(levels.chunks_exact_mut(16))
        .enumerate()
    {
        let dl = b.scale(s);
        if dl == 0.0 {
            continue;
        }
        for (q, &v) in levels.iter_mut().zip(x) {
            *q = (nearest_int(v / dl).clamp(-32, 31) + 32) as i8;
        }
    }

    let levels = levels.map(|q| q as u8);
    for half in 0..2 {
        let l = &levels[128 * half..];
        let (ql, qh) = (&mut b.ql[64 * half..], &mut b.qh[32 * half..]);
        for j in 0..32 {
            ql[j] = (l[j] & 0xF) | ((l[j + 64] & 0xF) << 4);
            ql[j + 32] = (l[j + 32] & 0xF) | ((l[j + 96] & 0xF) << 4);
            qh[j] = (l[j] >> 4)
                | ((l[j + 32] >> 4) << 2)
                | ((l[j + 64] >> 4) << 4)
                | ((l[j + 96] >> 4) << 6);
        }
    }
    b
}
