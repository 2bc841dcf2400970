//! The GGML tensor element types a GGUF file can name, with the two facts every reader needs:
//! how many weights one block holds and how many bytes it takes. The arithmetic on the blocks
//! lives in `rullama-quant`; this table is here so the parser can size tensors without it.

use std::fmt;

/// A GGML tensor type, as stored (u32) in a GGUF tensor info.
///
/// Ids follow `ggml.h`. Ids that GGML retired (4, 5, 31-33, 36-38) are not listed, and a file
/// that uses one gets [`crate::GgufError::UnknownTensorType`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum GgmlType {
    /// 32-bit float.
    F32,
    /// IEEE 16-bit float.
    F16,
    /// 32 weights: an f16 scale and 4-bit values.
    Q4_0,
    /// 32 weights: an f16 scale and minimum, 4-bit values.
    Q4_1,
    /// 32 weights: an f16 scale and 5-bit values (the fifth bits packed apart).
    Q5_0,
    /// 32 weights: an f16 scale and minimum, 5-bit values.
    Q5_1,
    /// 32 weights: an f16 scale and 8-bit values.
    Q8_0,
    /// 32 weights: an f16 scale, the f16 scaled sum, 8-bit values (GGML's activation format).
    Q8_1,
    /// K-quant, 256 weights: 16 sub-blocks with 4-bit scales and minimums, 2-bit values.
    Q2K,
    /// K-quant, 256 weights: 16 sub-blocks with 6-bit scales, 3-bit values.
    Q3K,
    /// K-quant, 256 weights: 8 sub-blocks with 6-bit scales and minimums, 4-bit values.
    Q4K,
    /// K-quant, 256 weights: 8 sub-blocks with 6-bit scales and minimums, 5-bit values.
    Q5K,
    /// K-quant, 256 weights: 16 sub-blocks with 8-bit scales, 6-bit values.
    Q6K,
    /// K-quant, 256 weights: an f32 scale, 8-bit values and sums of 16 (GGML's activation format for k-quant dots).
    Q8K,
    /// I-quant, 256 weights at 2.06 bits: values from a lattice codebook, signs apart.
    Iq2Xxs,
    /// I-quant, 256 weights at 2.31 bits: as IQ2_XXS with 4-bit sub-block scales.
    Iq2Xs,
    /// I-quant, 256 weights at 3.06 bits: lattice codebook values.
    Iq3Xxs,
    /// I-quant, 256 weights at 1.56 bits.
    Iq1S,
    /// 32 weights: an f16 scale and 4-bit indices into a non-linear 16-value table.
    Iq4Nl,
    /// I-quant, 256 weights at 3.44 bits.
    Iq3S,
    /// I-quant, 256 weights at 2.56 bits.
    Iq2S,
    /// 256 weights: IQ4_NL's table with 6-bit scales per 32.
    Iq4Xs,
    /// 8-bit signed integer.
    I8,
    /// 16-bit signed integer.
    I16,
    /// 32-bit signed integer.
    I32,
    /// 64-bit signed integer.
    I64,
    /// 64-bit float.
    F64,
    /// I-quant, 256 weights at 1.75 bits.
    Iq1M,
    /// bfloat16: an f32's top 16 bits.
    Bf16,
    /// Ternary, 256 weights: values in {-1, 0, 1} packed five to a byte, an f16 scale.
    Tq1_0,
    /// Ternary, 256 weights: values in {-1, 0, 1} in 2 bits each, an f16 scale.
    Tq2_0,
    /// 32 weights: 4-bit floats (E2M1) sharing one power-of-two (E8M0) scale.
    Mxfp4,
    /// 64 weights: 4-bit floats (E2M1) with an 8-bit float (E4M3) scale per 16.
    Nvfp4,
    /// OxiBonsai's 1-bit format: 128 sign bits and one f16 scale per block (mainline `Q1_0`).
    Q1_0G128,
}

/// Block geometry of one type: `block_size` weights are stored in `type_size` bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockLayout {
    /// Weights per block (1 for the plain number types).
    pub block_size: usize,
    /// Bytes per block.
    pub type_size: usize,
}

const QK_K: usize = 256;

impl GgmlType {
    /// Every type this table knows, in id order.
    pub const ALL: [GgmlType; 34] = [
        GgmlType::F32,
        GgmlType::F16,
        GgmlType::Q4_0,
        GgmlType::Q4_1,
        GgmlType::Q5_0,
        GgmlType::Q5_1,
        GgmlType::Q8_0,
        GgmlType::Q8_1,
        GgmlType::Q2K,
        GgmlType::Q3K,
        GgmlType::Q4K,
        GgmlType::Q5K,
        GgmlType::Q6K,
        GgmlType::Q8K,
        GgmlType::Iq2Xxs,
        GgmlType::Iq2Xs,
        GgmlType::Iq3Xxs,
        GgmlType::Iq1S,
        GgmlType::Iq4Nl,
        GgmlType::Iq3S,
        GgmlType::Iq2S,
        GgmlType::Iq4Xs,
        GgmlType::I8,
        GgmlType::I16,
        GgmlType::I32,
        GgmlType::I64,
        GgmlType::F64,
        GgmlType::Iq1M,
        GgmlType::Bf16,
        GgmlType::Tq1_0,
        GgmlType::Tq2_0,
        GgmlType::Mxfp4,
        GgmlType::Nvfp4,
        GgmlType::Q1_0G128,
    ];

    /// The type for a GGUF type id, or `None` for an id GGML does not (or no longer) define.
    pub fn from_id(id: u32) -> Option<GgmlType> {
        Self::ALL.into_iter().find(|t| t.id() == id)
    }

    /// The id stored in GGUF files.
    pub const fn id(self) -> u32 {
        use GgmlType::*;
        match self {
            F32 => 0,
            F16 => 1,
            Q4_0 => 2,
            Q4_1 => 3,
            Q5_0 => 6,
            Q5_1 => 7,
            Q8_0 => 8,
            Q8_1 => 9,
            Q2K => 10,
            Q3K => 11,
            Q4K => 12,
            Q5K => 13,
            Q6K => 14,
            Q8K => 15,
            Iq2Xxs => 16,
            Iq2Xs => 17,
            Iq3Xxs => 18,
            Iq1S => 19,
            Iq4Nl => 20,
            Iq3S => 21,
            Iq2S => 22,
            Iq4Xs => 23,
            I8 => 24,
            I16 => 25,
            I32 => 26,
            I64 => 27,
            F64 => 28,
            Iq1M => 29,
            Bf16 => 30,
            Tq1_0 => 34,
            Tq2_0 => 35,
            Mxfp4 => 39,
            Nvfp4 => 40,
            Q1_0G128 => 41,
        }
    }

    /// The name GGML prints (`ggml_type_name`).
    pub const fn name(self) -> &'static str {
        use GgmlType::*;
        match self {
            F32 => "F32",
            F16 => "F16",
            Q4_0 => "Q4_0",
            Q4_1 => "Q4_1",
            Q5_0 => "Q5_0",
            Q5_1 => "Q5_1",
            Q8_0 => "Q8_0",
            Q8_1 => "Q8_1",
            Q2K => "Q2_K",
            Q3K => "Q3_K",
            Q4K => "Q4_K",
            Q5K => "Q5_K",
            Q6K => "Q6_K",
            Q8K => "Q8_K",
            Iq2Xxs => "IQ2_XXS",
            Iq2Xs => "IQ2_XS",
            Iq3Xxs => "IQ3_XXS",
            Iq1S => "IQ1_S",
            Iq4Nl => "IQ4_NL",
            Iq3S => "IQ3_S",
            Iq2S => "IQ2_S",
            Iq4Xs => "IQ4_XS",
            I8 => "I8",
            I16 => "I16",
            I32 => "I32",
            I64 => "I64",
            F64 => "F64",
            Iq1M => "IQ1_M",
            Bf16 => "BF16",
            Tq1_0 => "TQ1_0",
            Tq2_0 => "TQ2_0",
            Mxfp4 => "MXFP4",
            Nvfp4 => "NVFP4",
            Q1_0G128 => "Q1_0_g128",
        }
    }

    /// Weights per block and bytes per block (GGML's `type_traits` table).
    pub const fn layout(self) -> BlockLayout {
        use GgmlType::*;
        let (block_size, type_size) = match self {
            F32 => (1, 4),
            F16 => (1, 2),
            Bf16 => (1, 2),
            F64 => (1, 8),
            I8 => (1, 1),
            I16 => (1, 2),
            I32 => (1, 4),
            I64 => (1, 8),
            Q4_0 => (32, 2 + 16),
            Q4_1 => (32, 2 + 2 + 16),
            Q5_0 => (32, 2 + 4 + 16),
            Q5_1 => (32, 2 + 2 + 4 + 16),
            Q8_0 => (32, 2 + 32),
            Q8_1 => (32, 2 + 2 + 32),
            Q2K => (QK_K, QK_K / 16 + QK_K / 4 + 2 + 2),
            Q3K => (QK_K, QK_K / 8 + QK_K / 4 + 12 + 2),
            Q4K => (QK_K, 2 + 2 + 12 + QK_K / 2),
            Q5K => (QK_K, 2 + 2 + 12 + QK_K / 8 + QK_K / 2),
            Q6K => (QK_K, QK_K / 2 + QK_K / 4 + QK_K / 16 + 2),
            Q8K => (QK_K, 4 + QK_K + QK_K / 16 * 2),
            Iq2Xxs => (QK_K, 2 + QK_K / 8 * 2),
            Iq2Xs => (QK_K, 2 + QK_K / 8 * 2 + QK_K / 32),
            Iq3Xxs => (QK_K, 2 + 3 * (QK_K / 8)),
            Iq1S => (QK_K, 2 + QK_K / 8 + QK_K / 16),
            Iq4Nl => (32, 2 + 16),
            Iq3S => (QK_K, 2 + QK_K / 4 + QK_K / 8 + QK_K / 32 + 4),
            Iq2S => (QK_K, 2 + QK_K / 4 + QK_K / 16),
            Iq4Xs => (QK_K, 2 + 2 + QK_K / 64 + QK_K / 2),
            Iq1M => (QK_K, QK_K / 8 + QK_K / 16 + QK_K / 32),
            Tq1_0 => (QK_K, 2 + 4 * 13),
            Tq2_0 => (QK_K, 2 + 64),
            Mxfp4 => (32, 1 + 16),
            Nvfp4 => (64, 4 + 32),
            Q1_0G128 => (128, 2 + 16),
        };
        BlockLayout {
            block_size,
            type_size,
        }
    }

    /// Bytes taken by `n_elements` weights, or `None` when `n_elements` is not a whole number
    /// of blocks or the product overflows.
    pub fn bytes_for(self, n_elements: u64) -> Option<u64> {
        let BlockLayout {
            block_size,
            type_size,
        } = self.layout();
        if !n_elements.is_multiple_of(block_size as u64) {
            return None;
        }
        (n_elements / block_size as u64).checked_mul(type_size as u64)
    }
}

impl fmt::Display for GgmlType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_and_are_unique() {
        for t in GgmlType::ALL {
            assert_eq!(GgmlType::from_id(t.id()), Some(t), "{t}");
        }
        let mut ids: Vec<u32> = GgmlType::ALL.iter().map(|t| t.id()).collect();
        ids.dedup();
        assert_eq!(ids.len(), GgmlType::ALL.len());
        for retired in [4, 5, 31, 32, 33, 36, 37, 38, 42, 1000] {
            assert_eq!(GgmlType::from_id(retired), None, "id {retired}");
        }
    }

    #[test]
    fn block_sizes_match_ggml_common_h() {
        // The static_asserts of ggml-common.h, restated.
        let expect = [
            (GgmlType::Q4_0, 18),
            (GgmlType::Q4_1, 20),
            (GgmlType::Q5_0, 22),
            (GgmlType::Q5_1, 24),
            (GgmlType::Q8_0, 34),
            (GgmlType::Q8_1, 36),
            (GgmlType::Q2K, 84),
            (GgmlType::Q3K, 110),
            (GgmlType::Q4K, 144),
            (GgmlType::Q5K, 176),
            (GgmlType::Q6K, 210),
            (GgmlType::Q8K, 292),
            (GgmlType::Iq4Nl, 18),
            (GgmlType::Iq4Xs, 136),
            (GgmlType::Q1_0G128, 18),
        ];
        for (t, bytes) in expect {
            assert_eq!(t.layout().type_size, bytes, "{t}");
        }
    }
}
