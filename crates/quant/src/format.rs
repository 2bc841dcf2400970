//! The trait every block format implements, and the runtime tag that picks one.

use rullama_gguf::GgmlType;

/// One block format: a fixed number of weights stored in a fixed number of bytes.
///
/// Implementations work on single blocks; the slice helpers in [`crate::ops`] loop over rows.
/// `block` always has exactly [`BlockFormat::BLOCK_BYTES`] bytes and `x`/`out` exactly
/// [`BlockFormat::BLOCK_SIZE`] values (callers check this once per row, not per block).
/// Any byte pattern is a valid block: decoding never panics, whatever the bytes.
pub trait BlockFormat {
    /// The runtime tag of this format.
    const FORMAT: Format;
    /// Weights per block.
    const BLOCK_SIZE: usize;
    /// Bytes per block.
    const BLOCK_BYTES: usize;

    /// Decode one block into `out`.
    fn dequantize_block(block: &[u8], out: &mut [f32]);

    /// Encode `x` into `block`, choosing scales the way llama.cpp's reference quantizer does.
    fn quantize_block(x: &[f32], block: &mut [u8]);

    /// `sum_i w_i * x_i` over the block's weights `w`, computed without materialising `w`.
    fn dot_block(block: &[u8], x: &[f32]) -> f32;
}

/// A weight storage format: a GGML type, or a format that GGUF has no id for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    /// A type GGUF files store.
    Ggml(GgmlType),
    /// 4-bit NormalFloat (QLoRA): 16-entry codebook, one f32 scale per 64-weight block.
    Nf4,
}

impl Format {
    /// Its name: GGML's for a GGML type (`Q4_K`), `NF4`.
    pub fn name(self) -> &'static str {
        match self {
            Format::Ggml(t) => t.name(),
            Format::Nf4 => "NF4",
        }
    }
}

impl std::fmt::Display for Format {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl From<GgmlType> for Format {
    fn from(t: GgmlType) -> Self {
        Format::Ggml(t)
    }
}
