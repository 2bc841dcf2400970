//! Re-encoding blocks into a wider format without changing a single weight, so that matrices
//! of two formats can share one: the GPU backend stacks the projections that read one input
//! (q, k and v) into one matrix and one product, and a Q4_K_M file often stores q and k in
//! Q5_0 but v in Q8_0 (llama.cpp gives the v of some layers more bits). Widening the Q5_0
//! rows to Q8_0 keeps the product one dispatch.
//!
//! Only exact widenings are offered: Q4_0 (`d * (q - 8)`) and Q5_0 (`d * (q - 16)`) into
//! Q8_0 (`d * q8`), the same f16 scale and each code minus its offset as the int8, which holds
//! -16..15 exactly. So a widened block decodes to the same f32 values, bit for bit.

use rullama_gguf::GgmlType;

use crate::error::QuantError;
use crate::format::{BlockFormat, Format};
use crate::q4_0::{BlockQ4_0, Q4_0};
use crate::q5_0::{BlockQ5_0, Q5_0};
use crate::q8_0::{BlockQ8_0, Q8_0};

/// The format that holds weights of both `a` and `b` exactly: `a` itself if they are one
/// format, Q8_0 for any pair of Q4_0, Q5_0 and Q8_0, none otherwise.
pub fn common_format(a: Format, b: Format) -> Option<Format> {
    if a == b {
        return Some(a);
    }
    let widens = |f| widens_into(f, Q8_0::FORMAT) || f == Q8_0::FORMAT;
    (widens(a) && widens(b)).then_some(Q8_0::FORMAT)
}

/// Whether [`widen`] re-encodes `from` into `to` (a different format).
pub fn widens_into(from: Format, to: Format) -> bool {
    to == Q8_0::FORMAT && matches!(from, Format::Ggml(GgmlType::Q4_0 | GgmlType::Q5_0))
}

/// `data` (whole blocks of `from`) re-encoded as `to`: a copy where the formats are one,
/// [`widens_into`]'s exact widenings otherwise.
pub fn widen(from: Format, to: Format, data: &[u8]) -> Result<Vec<u8>, QuantError> {
    if from == to {
        return Ok(data.to_vec());
    }
    match from {
        _ if !widens_into(from, to) => Err(QuantError::Unsupported(from)),
        Format::Ggml(GgmlType::Q4_0) => blocks_to_q8::<Q4_0>(data, |b| {
            let b: &BlockQ4_0 = bytemuck::from_bytes(b);
            let codes = std::array::from_fn(|j| {
                let q = b.qs[j % 16];
                let q = if j < 16 { q & 0x0f } else { q >> 4 };
                q as i8 - 8
            });
            (b.d, codes)
        }),
        Format::Ggml(GgmlType::Q5_0) => blocks_to_q8::<Q5_0>(data, |b| {
            let b: &BlockQ5_0 = bytemuck::from_bytes(b);
            let mut codes = [0i8; 32];
            for j in 0..16 {
                let (c0, c1) = b.codes(j);
                codes[j] = c0 as i8 - 16;
                codes[j + 16] = c1 as i8 - 16;
            }
            (b.d, codes)
        }),
        _ => Err(QuantError::Unsupported(from)),
    }
}

/// Each block of `F` in `data` as a Q8_0 block of the scale and int8 codes `decode` gives.
fn blocks_to_q8<F: BlockFormat>(
    data: &[u8],
    decode: impl Fn(&[u8]) -> ([u8; 2], [i8; 32]),
) -> Result<Vec<u8>, QuantError> {
    if !data.len().is_multiple_of(F::BLOCK_BYTES) {
        return Err(QuantError::PartialBlockBytes {
            format: F::FORMAT,
            bytes: data.len(),
            block_bytes: F::BLOCK_BYTES,
        });
    }
    let mut out = Vec::with_capacity(data.len() / F::BLOCK_BYTES * Q8_0::BLOCK_BYTES);
    for block in data.chunks_exact(F::BLOCK_BYTES) {
        let (d, qs) = decode(block);
        out.extend_from_slice(bytemuck::bytes_of(&BlockQ8_0 { d, qs }));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::dequantize_to_vec;
    use proptest::prelude::*;

    fn bits(values: &[f32]) -> Vec<u32> {
        values.iter().map(|v| v.to_bits()).collect()
    }

    proptest! {
        /// Any bytes are valid blocks (NaN and infinite scales included): the widened blocks
        /// decode to the very same bits.
        #[test]
        fn widening_keeps_every_weight(
            blocks in proptest::collection::vec(any::<[u8; 22]>(), 0..8),
            q4 in any::<bool>(),
        ) {
            let from = if q4 { Q4_0::FORMAT } else { Q5_0::FORMAT };
            let size = if q4 { Q4_0::BLOCK_BYTES } else { Q5_0::BLOCK_BYTES };
            let data: Vec<u8> = blocks.iter().flat_map(|b| b[..size].to_vec()).collect();
            let wide = widen(from, Q8_0::FORMAT, &data).unwrap();
            prop_assert_eq!(wide.len(), blocks.len() * Q8_0::BLOCK_BYTES);
            let before = dequantize_to_vec(from, &data).unwrap();
            let after = dequantize_to_vec(Q8_0::FORMAT, &wide).unwrap();
            prop_assert_eq!(bits(&before), bits(&after));
        }
    }

    #[test]
    fn common_formats() {
        let [q4_0, q5_0, q8_0, q4_k] = [
            GgmlType::Q4_0,
            GgmlType::Q5_0,
            GgmlType::Q8_0,
            GgmlType::Q4K,
        ]
        .map(Format::Ggml);
        assert_eq!(common_format(q5_0, q8_0), Some(q8_0));
        assert_eq!(common_format(q8_0, q4_0), Some(q8_0));
        assert_eq!(common_format(q4_0, q5_0), Some(q8_0));
        assert_eq!(common_format(q4_k, q4_k), Some(q4_k));
        assert_eq!(common_format(q4_k, q8_0), None);
        assert!(!widens_into(q8_0, q5_0));
    }

    #[test]
    fn bad_input_is_an_error() {
        let q5_0 = Q5_0::FORMAT;
        assert!(matches!(
            widen(q5_0, Q8_0::FORMAT, &[0; 23]),
            Err(QuantError::PartialBlockBytes { .. })
        ));
        assert_eq!(
            widen(Q8_0::FORMAT, q5_0, &[0; 34]),
            Err(QuantError::Unsupported(Q8_0::FORMAT))
        );
        assert_eq!(widen(q5_0, q5_0, &[7; 22]).unwrap(), vec![7; 22]);
    }
}
