//! IQ4_NL: 32 weights as 4-bit indices into a fixed non-linear grid, one f16 scale.

use bytemuck::{Pod, Zeroable};
use rullama_gguf::GgmlType;

use crate::format::{BlockFormat, Format};
use crate::num::{f16_to_f32, f32_to_f16};

/// The grid (`kvalues_iq4nl`): denser near zero, where most weights are.
pub const KVALUES_IQ4NL: [i8; 16] = [
    -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113,
];

/// `w[j] = d * KVALUES_IQ4NL[q[j]]`; nibbles ordered as in Q4_0 (low: `j`, high: `j + 16`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Pod, Zeroable)]
pub struct BlockIq4Nl {
    /// The scale `d`, f16 bits.
    pub d: [u8; 2],
    /// Two 4-bit grid indices a byte.
    pub qs: [u8; 16],
}

const _: () = assert!(size_of::<BlockIq4Nl>() == 18);

/// GGML's `best_index_int8` on the IQ4 grid: the nearest grid index to `x`, ties to the upper
/// one (a binary search on doubled midpoints, so the comparisons are exact). NaN gives 0.
pub(crate) fn best_index(x: f32) -> u8 {
    let x2 = x + x;
    let mut idx = 0;
    let mut step = 8;
    while step > 0 {
        let j = idx + step;
        if x2 >= f32::from(i16::from(KVALUES_IQ4NL[j - 1]) + i16::from(KVALUES_IQ4NL[j])) {
            idx = j;
        }
        step >>= 1;
    }
    idx as u8
}

/// The first-level fit of `quantize_row_iq4_nl_impl` for one 32-weight block without importance
/// weights (each weight counts `x^2`). Picks indices for a start scale, refits the scale by
/// weighted least squares, then (for `ntry > 0`) tries `2 * ntry + 1` nearby start scales and
/// keeps the best fit. Writes the indices of the start scale to `codes`; returns the scale.
pub(crate) fn fit_block(xb: &[f32], ntry: i32, codes: &mut [u8]) -> f32 {
    let (mut amax, mut max) = (0.0f32, 0.0f32);
    for &v in xb {
        if v.abs() > amax {
            amax = v.abs();
            max = v;
        }
    }
    if amax < 1e-15 {
        codes.fill(0);
        return 0.0;
    }
    let v0 = f32::from(KVALUES_IQ4NL[0]);
    let mut d = if ntry > 0 { -max / v0 } else { max / v0 };
    let (mut sumqx, mut sumq2) = (0.0f32, 0.0f32);
    let id = 1.0 / d;
    for (c, &x) in codes.iter_mut().zip(xb) {
        *c = best_index(id * x);
        let q = f32::from(KVALUES_IQ4NL[usize::from(*c)]);
        let w = x * x;
        sumqx += w * q * x;
        sumq2 += w * q * q;
    }
    d = if sumq2 > 0.0 { sumqx / sumq2 } else { 0.0 };
    let mut best = d * sumqx;
    for itry in -ntry..=ntry {
        let id = (itry + i32::from(KVALUES_IQ4NL[0])) as f32 / max;
        let (mut sumqx, mut sumq2) = (0.0f32, 0.0f32);
        for &x in xb {
            let q = f32::from(KVALUES_IQ4NL[usize::from(best_index(id * x))]);
            let w = x * x;
            sumqx += w * q * x;
            sumq2 += w * q * q;
        }
        if sumq2 > 0.0 && sumqx * sumqx > best * sumq2 {
            d = sumqx / sumq2;
            best = d * sumqx;
        }
    }
    d
}

/// Sum of `KVALUES_IQ4NL[q] * x` over 16 bytes of codes covering 32 weights.
pub(crate) fn grid_dot(qs: &[u8], x: &[f32]) -> f32 {
    let mut sum = 0.0f32;
    for (j, &q) in qs.iter().enumerate() {
        sum += f32::from(KVALUES_IQ4NL[usize::from(q & 0x0f)]) * x[j];
        sum += f32::from(KVALUES_IQ4NL[usize::from(q >> 4)]) * x[j + 16];
    }
    sum
}

/// Decode 16 bytes of codes into 32 weights with scale `d`.
pub(crate) fn grid_dequantize(qs: &[u8], d: f32, out: &mut [f32]) {
    for (j, &q) in qs.iter().enumerate() {
        out[j] = d * f32::from(KVALUES_IQ4NL[usize::from(q & 0x0f)]);
        out[j + 16] = d * f32::from(KVALUES_IQ4NL[usize::from(q >> 4)]);
    }
}

/// The IQ4_NL format.
#[derive(Debug, Clone, Copy)]
pub struct Iq4Nl;

impl BlockFormat for Iq4Nl {
    const FORMAT: Format = Format::Ggml(GgmlType::Iq4Nl);
    const BLOCK_SIZE: usize = 32;
    const BLOCK_BYTES: usize = size_of::<BlockIq4Nl>();

    fn dequantize_block(block: &[u8], out: &mut [f32]) {
        let b: &BlockIq4Nl = bytemuck::from_bytes(block);
        grid_dequantize(&b.qs, f16_to_f32(b.d), out);
    }

    /// `quantize_row_iq4_nl_ref`: one least-squares refit, no scale search (`ntry = -1`), and
    /// the indices of the start scale are kept.
    fn quantize_block(x: &[f32], block: &mut [u8]) {
        let mut codes = [0u8; 32];
        let d = fit_block(x, -1, &mut codes);
        let b: &mut BlockIq4Nl = bytemuck::from_bytes_mut(block);
        b.d = f32_to_f16(d);
        for (j, q) in b.qs.iter_mut().enumerate() {
            *q = codes[j] | (codes[j + 16] << 4);
        }
    }

    fn dot_block(block: &[u8], x: &[f32]) -> f32 {
        let b: &BlockIq4Nl = bytemuck::from_bytes(block);
        grid_dot(&b.qs, x) * f16_to_f32(b.d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn best_index_is_the_nearest_grid_value() {
        for i in -2000..=2000 {
            let x = i as f32 * 0.0731;
            let brute = (0..16)
                .min_by(|&a, &b| {
                    let da = (f32::from(KVALUES_IQ4NL[a]) - x).abs();
                    let db = (f32::from(KVALUES_IQ4NL[b]) - x).abs();
                    da.total_cmp(&db).then(b.cmp(&a))
                })
                .unwrap();
            assert_eq!(usize::from(best_index(x)), brute, "x = {x}");
        }
        assert_eq!(best_index(f32::NAN), 0);
    }
}
