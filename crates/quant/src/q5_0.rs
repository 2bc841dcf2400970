//! Q5_0: 32 weights as 5-bit codes around 16, one f16 scale.

use bytemuck::{Pod, Zeroable};
use rullama_gguf::GgmlType;

use crate::format::{BlockFormat, Format};
use crate::num::{f16_to_f32, f32_to_f16, trunc_code};

/// `w[j] = d * (q[j] - 16)`. The low four bits of each code are packed as in Q4_0 (byte `j`:
/// low nibble weight `j`, high nibble weight `j + 16`); bit `j` of the little-endian u32 `qh`
/// is the fifth bit of weight `j`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Pod, Zeroable)]
pub struct BlockQ5_0 {
    /// The scale `d`, f16 bits.
    pub d: [u8; 2],
    /// The codes' fifth bits, a little-endian u32.
    pub qh: [u8; 4],
    /// The codes' low four bits, two a byte.
    pub qs: [u8; 16],
}

const _: () = assert!(size_of::<BlockQ5_0>() == 22);

impl BlockQ5_0 {
    /// The 5-bit codes of weights `j` and `j + 16`.
    pub(crate) fn codes(&self, j: usize) -> (u8, u8) {
        five_bit_codes(self.qs[j], u32::from_le_bytes(self.qh), j)
    }
}

/// Join the nibbles of byte `j` with their fifth bits from `qh` (shared with Q5_1).
pub(crate) fn five_bit_codes(qs: u8, qh: u32, j: usize) -> (u8, u8) {
    let h0 = ((qh >> j) & 1) as u8;
    let h1 = ((qh >> (j + 16)) & 1) as u8;
    ((qs & 0x0f) | (h0 << 4), (qs >> 4) | (h1 << 4))
}

/// Pack 32 five-bit codes into `qs` and `qh` (shared with Q5_1).
pub(crate) fn pack_five_bit(codes: &[u8; 32], qs: &mut [u8; 16], qh: &mut [u8; 4]) {
    let mut h = 0u32;
    for j in 0..16 {
        let (c0, c1) = (codes[j], codes[j + 16]);
        qs[j] = (c0 & 0x0f) | ((c1 & 0x0f) << 4);
        h |= u32::from(c0 >> 4 & 1) << j;
        h |= u32::from(c1 >> 4 & 1) << (j + 16);
    }
    *qh = h.to_le_bytes();
}

/// The Q5_0 format.
#[derive(Debug, Clone, Copy)]
pub struct Q5_0;

impl BlockFormat for Q5_0 {
    const FORMAT: Format = Format::Ggml(GgmlType::Q5_0);
    const BLOCK_SIZE: usize = 32;
    const BLOCK_BYTES: usize = size_of::<BlockQ5_0>();

    fn dequantize_block(block: &[u8], out: &mut [f32]) {
        let b: &BlockQ5_0 = bytemuck::from_bytes(block);
        let d = f16_to_f32(b.d);
        for j in 0..16 {
            let (c0, c1) = b.codes(j);
            out[j] = (i32::from(c0) - 16) as f32 * d;
            out[j + 16] = (i32::from(c1) - 16) as f32 * d;
        }
    }

    /// `quantize_row_q5_0_ref`: as Q4_0 with `d = max / -16` and codes clamped to 31.
    fn quantize_block(x: &[f32], block: &mut [u8]) {
        let (mut amax, mut max) = (0.0f32, 0.0f32);
        for &v in x {
            if amax < v.abs() {
                amax = v.abs();
                max = v;
            }
        }
        let d = max / -16.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        let codes: [u8; 32] = std::array::from_fn(|j| trunc_code(x[j] * id + 16.5, 31));
        let b: &mut BlockQ5_0 = bytemuck::from_bytes_mut(block);
        b.d = f32_to_f16(d);
        pack_five_bit(&codes, &mut b.qs, &mut b.qh);
    }

    fn dot_block(block: &[u8], x: &[f32]) -> f32 {
        let b: &BlockQ5_0 = bytemuck::from_bytes(block);
        let mut sum = 0.0f32;
        for j in 0..16 {
            let (c0, c1) = b.codes(j);
            sum += (i32::from(c0) - 16) as f32 * x[j];
            sum += (i32::from(c1) - 16) as f32 * x[j + 16];
        }
        sum * f16_to_f32(b.d)
    }
}
