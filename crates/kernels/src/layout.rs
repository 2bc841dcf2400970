//! The bytes a weight chunk has on the GPU: GGUF's block layout, or split by field into planes
//! for the formats that name planes ([`GpuFormat::planes`]); Q4_K's and Q5_K's blocks keep
//! their place with their 6-bit scales and mins regrouped ([`regroup_scales_k4`]).
//!
//! Why: a Q8_0 block is 34 bytes, so GGUF's layout puts its 32 quants at an offset of 2 mod 4
//! and a kernel must assemble each word from two loads. Split by field, a chunk holds all its
//! blocks' quants back to back (16-byte aligned, one vec4 load per 16 bytes) and their scales
//! in small planes after them; the byte count grows only by the padding of each plane to 16
//! bytes and a 16-byte header. The header (WGSL `plane_start` in `common/blocks.wgsl`) gives
//! where planes 1.. start, in units of 16 bytes; plane 0 starts right after it.

use std::borrow::Cow;

use crate::format::GpuFormat;

/// Alignment of the header and of each plane, in bytes (one WGSL `vec4<u32>`).
const ALIGN: usize = 16;

/// The most extra bytes planes add to a chunk: the header and each plane's padding.
pub fn planar_overhead(format: GpuFormat) -> usize {
    format.planes().map_or(0, |p| ALIGN + ALIGN * p.len())
}

/// Where Q4_K's and Q5_K's 12 bytes of packed scales and mins start in a block (after f16 d
/// and f16 dmin).
const SCALES_K4_AT: usize = 4;

/// The GPU bytes of `gguf` (whole blocks of `format`, as GGUF stores them), padded to 16 bytes.
pub fn gpu_bytes(format: GpuFormat, gguf: &[u8]) -> Cow<'_, [u8]> {
    let block_bytes = format.ggml().layout().type_size;
    let Some(fields) = format.planes() else {
        if !format.regroups_scales() && gguf.len().is_multiple_of(ALIGN) {
            return Cow::Borrowed(gguf);
        }
        let mut v = gguf.to_vec();
        if format.regroups_scales() {
            for block in v.chunks_exact_mut(block_bytes) {
                let scales = &mut block[SCALES_K4_AT..SCALES_K4_AT + 12];
                let packed: [u8; 12] = (*scales).try_into().expect("12 bytes");
                scales.copy_from_slice(&regroup_scales_k4(&packed));
            }
        }
        v.resize(gguf.len().next_multiple_of(ALIGN), 0);
        return Cow::Owned(v);
    };
    let n_blocks = gguf.len() / block_bytes;
    debug_assert_eq!(n_blocks * block_bytes, gguf.len(), "partial block");
    // Where each plane starts: the header first, then the planes in order, each 16-aligned.
    let mut starts = Vec::with_capacity(fields.len());
    let mut end = ALIGN;
    for f in fields {
        starts.push(end);
        end = (end + f.bytes * n_blocks).next_multiple_of(ALIGN);
    }
    let mut out = vec![0u8; end];
    for (k, &start) in starts.iter().enumerate().skip(1).take(3) {
        let at = 4 * (k - 1);
        out[at..at + 4].copy_from_slice(&((start / ALIGN) as u32).to_le_bytes());
    }
    for (f, &start) in fields.iter().zip(&starts) {
        let plane = &mut out[start..start + f.bytes * n_blocks];
        for (dst, block) in plane
            .chunks_exact_mut(f.bytes)
            .zip(gguf.chunks_exact(block_bytes))
        {
            dst.copy_from_slice(&block[f.offset..f.offset + f.bytes]);
        }
    }
    Cow::Owned(out)
}

/// Q4_K's and Q5_K's eight 6-bit scales `sc` and mins `m`, from GGML's packing
/// (`get_scale_min_k4`, which spreads units 4..7 over spare bits of three bytes) into the
/// order the WGSL reads (`formats/scales_k4.wgsl`): the four values of units 2g and 2g + 1
/// in byte g of each of three words, so a matvec lane decodes them with a few shifts.
/// ```text
///   word 0, byte g: low 4 bits of sc[2g] | low 4 bits of sc[2g + 1] << 4
///   word 1, byte g: the same for m
///   word 2, byte g: top 2 bits of sc[2g], sc[2g + 1], m[2g], m[2g + 1], at bits 0, 2, 4, 6
/// ```
pub fn regroup_scales_k4(packed: &[u8; 12]) -> [u8; 12] {
    let (sc, m) = rullama_quant::kquants::unpack_scale_min_k4(packed);
    let mut out = [0u8; 12];
    for g in 0..4 {
        let (a, b) = (2 * g, 2 * g + 1);
        out[g] = (sc[a] & 15) | (sc[b] & 15) << 4;
        out[4 + g] = (m[a] & 15) | (m[b] & 15) << 4;
        out[8 + g] = sc[a] >> 4 | (sc[b] >> 4) << 2 | (m[a] >> 4) << 4 | (m[b] >> 4) << 6;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every planar format: the planes hold exactly GGUF's fields, each byte once, and the
    /// header points at them.
    #[test]
    fn planes_hold_every_field_byte_once() {
        for format in GpuFormat::ALL {
            let Some(fields) = format.planes() else {
                continue;
            };
            let block_bytes = format.ggml().layout().type_size;
            let covered: usize = fields.iter().map(|f| f.bytes).sum();
            assert_eq!(covered, block_bytes, "{format:?} fields cover the block");
            let n_blocks = 5;
            let gguf: Vec<u8> = (0..block_bytes * n_blocks)
                .map(|i| i as u8 ^ 0x5a)
                .collect();
            let gpu = gpu_bytes(format, &gguf);
            assert!(gpu.len().is_multiple_of(ALIGN));
            assert!(gpu.len() <= gguf.len() + planar_overhead(format));
            let word = |i: usize| u32::from_le_bytes(gpu[4 * i..4 * i + 4].try_into().unwrap());
            for (k, f) in fields.iter().enumerate() {
                let start = if k == 0 {
                    ALIGN
                } else {
                    word(k - 1) as usize * ALIGN
                };
                for b in 0..n_blocks {
                    let got = &gpu[start + b * f.bytes..][..f.bytes];
                    let want = &gguf[b * block_bytes + f.offset..][..f.bytes];
                    assert_eq!(got, want, "{format:?} plane {k} block {b}");
                }
            }
        }
    }

    /// The row count `GpuWeight::upload` picks for a binding limit always fits in it.
    #[test]
    fn chunks_fit_the_binding_limit() {
        use crate::tensor::{GpuWeight, WeightShape};
        for format in GpuFormat::ALL {
            let n_in = 256;
            let shape = WeightShape {
                format,
                n_in,
                n_out: 1000,
            };
            let row_bytes = format.row_bytes(n_in);
            for limit in [row_bytes + 100, 3 * row_bytes + 77, 10_000, 123_457] {
                let rows = GpuWeight::rows_per_chunk(shape, limit as u64).unwrap();
                let gguf = vec![0u8; rows * row_bytes];
                assert!(
                    gpu_bytes(format, &gguf).len() <= limit,
                    "{format:?} {limit}"
                );
            }
            assert!(GpuWeight::rows_per_chunk(shape, row_bytes as u64 / 2).is_err());
        }
    }

    /// The regrouped scales hold every (scale, min) GGML's packing does, read back as the
    /// WGSL reads them (`scales_k4_pair` in formats/scales_k4.wgsl), for every 6-bit value.
    #[test]
    fn regrouped_scales_hold_every_scale_and_min() {
        let mut rng = 0x9e37_79b9_7f4a_7c15u64;
        for case in 0..512 {
            let mut packed = [0u8; 12];
            for b in &mut packed {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                *b = rng as u8;
            }
            // Every value 0..63 appears as a scale and a min in the first 8 cases.
            if case < 8 {
                let v: [u8; 8] = std::array::from_fn(|j| (8 * case + j) as u8);
                packed = rullama_quant::kquants::pack_scale_min_k4(&v, &v.map(|x| 63 - x));
            }
            let (sc, m) = rullama_quant::kquants::unpack_scale_min_k4(&packed);
            let r = regroup_scales_k4(&packed);
            let word = |k: usize| u32::from_le_bytes(r[4 * k..4 * k + 4].try_into().unwrap());
            for g in 0..4 {
                let byte = |k: usize| (word(k) >> (8 * g)) & 0xff;
                let (lo_s, lo_m, hi) = (byte(0), byte(1), byte(2));
                let pair = [
                    (lo_s & 15) | ((hi & 3) << 4),
                    (lo_s >> 4) | (((hi >> 2) & 3) << 4),
                    (lo_m & 15) | (((hi >> 4) & 3) << 4),
                    (lo_m >> 4) | (((hi >> 6) & 3) << 4),
                ];
                let want = [sc[2 * g], sc[2 * g + 1], m[2 * g], m[2 * g + 1]].map(u32::from);
                assert_eq!(pair, want, "case {case} pair {g}");
            }
        }
    }

    /// Q4_K and Q5_K blocks keep their bytes in place except the 12 scale bytes.
    #[test]
    fn regrouping_touches_only_the_scales() {
        for format in [GpuFormat::Q4K, GpuFormat::Q5K] {
            let block_bytes = format.ggml().layout().type_size;
            let gguf: Vec<u8> = (0..3 * block_bytes).map(|i| (i * 7) as u8).collect();
            let gpu = gpu_bytes(format, &gguf);
            assert!(gpu.len().is_multiple_of(ALIGN));
            for (b, (got, want)) in gpu
                .chunks(block_bytes)
                .zip(gguf.chunks_exact(block_bytes))
                .enumerate()
            {
                let scales = SCALES_K4_AT..SCALES_K4_AT + 12;
                assert_eq!(got[..scales.start], want[..scales.start], "{format:?} {b}");
                assert_eq!(got[scales.end..], want[scales.end..], "{format:?} {b}");
                let packed: &[u8; 12] = want[scales.clone()].try_into().unwrap();
                assert_eq!(got[scales], regroup_scales_k4(packed), "{format:?} {b}");
            }
        }
    }

    #[test]
    fn unplanar_formats_are_padded_copies() {
        let gguf: Vec<u8> = (0..100u8).collect();
        let gpu = gpu_bytes(GpuFormat::F32, &gguf);
        assert_eq!(gpu.len(), 112);
        assert_eq!(&gpu[..100], &gguf[..]);
    }
}
