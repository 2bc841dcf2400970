//! The bytes a weight chunk has on the GPU: GGUF's block layout, or split by field into planes
//! for the formats that name planes ([`GpuFormat::planes`]).
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

/// The GPU bytes of `gguf` (whole blocks of `format`, as GGUF stores them), padded to 16 bytes.
pub fn gpu_bytes(format: GpuFormat, gguf: &[u8]) -> Cow<'_, [u8]> {
    let Some(fields) = format.planes() else {
        if gguf.len().is_multiple_of(ALIGN) {
            return Cow::Borrowed(gguf);
        }
        let mut v = gguf.to_vec();
        v.resize(gguf.len().next_multiple_of(ALIGN), 0);
        return Cow::Owned(v);
    };
    let block_bytes = format.ggml().layout().type_size;
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

    #[test]
    fn unplanar_formats_are_padded_copies() {
        let gguf: Vec<u8> = (0..100u8).collect();
        let gpu = gpu_bytes(GpuFormat::F32, &gguf);
        assert_eq!(gpu.len(), 112);
        assert_eq!(&gpu[..100], &gguf[..]);
    }
}
