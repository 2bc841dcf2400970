//! Weight formats the GPU kernels decode, each with its WGSL decoder file.
//!
//! Weights stay in GGUF's block layout on the GPU (uploaded as raw bytes). Blocks of 18, 22, 34,
//! 110 and 210 bytes are not 4-byte aligned; the WGSL reads them through the byte helpers in
//! `shaders/common/blocks.wgsl` (two-word unaligned loads), so no repacking is needed.

use rullama_gguf::GgmlType;
use rullama_quant::Format;

use crate::error::GpuError;
use crate::shader::{ShaderFile, shader_file};

/// A weight format with a GPU decoder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GpuFormat {
    F32,
    F16,
    Bf16,
    Q8_0,
    Q4_0,
    Q4_1,
    Q5_0,
    Q5_1,
    Q2K,
    Q3K,
    Q4K,
    Q5K,
    Q6K,
}

// `const`, not `static`: `decoder` returns promoted `&'static` slices of them, which may name
// constants but not statics.
const F32: ShaderFile = shader_file!("formats/f32.wgsl");
const F16: ShaderFile = shader_file!("formats/f16.wgsl");
const Q8_0: ShaderFile = shader_file!("formats/q8_0.wgsl");
const Q4_0: ShaderFile = shader_file!("formats/q4_0.wgsl");
const Q4_1: ShaderFile = shader_file!("formats/q4_1.wgsl");
const BF16: ShaderFile = shader_file!("formats/bf16.wgsl");
const Q5_0: ShaderFile = shader_file!("formats/q5_0.wgsl");
const Q5_1: ShaderFile = shader_file!("formats/q5_1.wgsl");
const Q2K: ShaderFile = shader_file!("formats/q2_k.wgsl");
const Q3K: ShaderFile = shader_file!("formats/q3_k.wgsl");
const Q4K: ShaderFile = shader_file!("formats/q4_k.wgsl");
const Q5K: ShaderFile = shader_file!("formats/q5_k.wgsl");
const Q6K: ShaderFile = shader_file!("formats/q6_k.wgsl");
/// Q5_0's and Q5_1's 5-bit codes: one copy for both decoders and dot files.
const Q5_CODES: ShaderFile = shader_file!("formats/q5_codes.wgsl");
/// Q4_K's and Q5_K's packed 6-bit (scale, min) pairs: one copy for both decoders and dot files.
const SCALE_MIN_K4: ShaderFile = shader_file!("formats/scale_min_k4.wgsl");

impl GpuFormat {
    pub const ALL: [GpuFormat; 13] = [
        GpuFormat::F32,
        GpuFormat::F16,
        GpuFormat::Bf16,
        GpuFormat::Q8_0,
        GpuFormat::Q4_0,
        GpuFormat::Q4_1,
        GpuFormat::Q5_0,
        GpuFormat::Q5_1,
        GpuFormat::Q2K,
        GpuFormat::Q3K,
        GpuFormat::Q4K,
        GpuFormat::Q5K,
        GpuFormat::Q6K,
    ];

    pub fn ggml(self) -> GgmlType {
        match self {
            GpuFormat::F32 => GgmlType::F32,
            GpuFormat::F16 => GgmlType::F16,
            GpuFormat::Bf16 => GgmlType::Bf16,
            GpuFormat::Q8_0 => GgmlType::Q8_0,
            GpuFormat::Q4_0 => GgmlType::Q4_0,
            GpuFormat::Q4_1 => GgmlType::Q4_1,
            GpuFormat::Q5_0 => GgmlType::Q5_0,
            GpuFormat::Q5_1 => GgmlType::Q5_1,
            GpuFormat::Q2K => GgmlType::Q2K,
            GpuFormat::Q3K => GgmlType::Q3K,
            GpuFormat::Q4K => GgmlType::Q4K,
            GpuFormat::Q5K => GgmlType::Q5K,
            GpuFormat::Q6K => GgmlType::Q6K,
        }
    }

    pub fn format(self) -> Format {
        Format::Ggml(self.ggml())
    }

    /// Weights per GGML block (1 for F32/F16, as GGML counts them).
    pub fn block_weights(self) -> usize {
        self.ggml().layout().block_size
    }

    /// Bytes of one row of `n_in` weights (`n_in` must be a multiple of the block size).
    pub fn row_bytes(self, n_in: usize) -> usize {
        let l = self.ggml().layout();
        n_in / l.block_size * l.type_size
    }

    /// The WGSL files that define `BLOCK_BYTES`, `BLOCK_UNITS` and `decode_unit` (the format's
    /// decoder, after any helper file it shares with another format). Every program that
    /// reads weights includes them, so a matvec dot file may use the decoder's field helpers.
    pub fn decoder(self) -> &'static [&'static ShaderFile] {
        match self {
            GpuFormat::F32 => &[&F32],
            GpuFormat::F16 => &[&F16],
            GpuFormat::Bf16 => &[&BF16],
            GpuFormat::Q8_0 => &[&Q8_0],
            GpuFormat::Q4_0 => &[&Q4_0],
            GpuFormat::Q4_1 => &[&Q4_1],
            GpuFormat::Q5_0 => &[&Q5_CODES, &Q5_0],
            GpuFormat::Q5_1 => &[&Q5_CODES, &Q5_1],
            GpuFormat::Q2K => &[&Q2K],
            GpuFormat::Q3K => &[&Q3K],
            GpuFormat::Q4K => &[&SCALE_MIN_K4, &Q4K],
            GpuFormat::Q5K => &[&SCALE_MIN_K4, &Q5K],
            GpuFormat::Q6K => &[&Q6K],
        }
    }

    pub fn name(self) -> &'static str {
        self.ggml().name()
    }
}

impl TryFrom<Format> for GpuFormat {
    type Error = GpuError;

    fn try_from(f: Format) -> Result<Self, GpuError> {
        GpuFormat::ALL
            .into_iter()
            .find(|g| g.format() == f)
            .ok_or(GpuError::UnsupportedFormat(f))
    }
}
