//! Weight formats the GPU kernels decode, each with its WGSL decoder file.
//!
//! Weights keep GGUF's block layout on the GPU, except formats whose blocks are not 16-byte
//! aligned and that decode millions of blocks per token: those are stored by field
//! ([`GpuFormat::planes`]), so kernels load 16 bytes of quants in one aligned vec4 load instead
//! of assembling unaligned words (see docs/KERNELS.md, "Weight layout on the GPU"). Other
//! blocks are read through the byte helpers of `shaders/common/blocks.wgsl` (Q3_K's 110-byte
//! blocks, for one, with two-word unaligned loads).

use rullama_gguf::GgmlType;
use rullama_quant::Format;

use crate::error::GpuError;
use crate::shader::{ShaderFile, shader_file};

/// One field of a GGUF block: `bytes` bytes at byte `offset`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockField {
    /// Its first byte in the block.
    pub offset: usize,
    /// Its size.
    pub bytes: usize,
}

/// A weight format with a GPU decoder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GpuFormat {
    /// GGML's F32.
    F32,
    /// GGML's F16.
    F16,
    /// GGML's BF16.
    Bf16,
    /// GGML's Q8_0.
    Q8_0,
    /// GGML's Q4_0.
    Q4_0,
    /// GGML's Q4_1.
    Q4_1,
    /// GGML's Q5_0.
    Q5_0,
    /// GGML's Q5_1.
    Q5_1,
    /// GGML's Q2_K.
    Q2K,
    /// GGML's Q3_K.
    Q3K,
    /// GGML's Q4_K.
    Q4K,
    /// GGML's Q5_K.
    Q5K,
    /// GGML's Q6_K.
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
/// `decode_half` over each format's `load_half_raw` and `decode_raw`: one copy for every
/// decoder.
const DECODE_HALF: ShaderFile = shader_file!("formats/decode_half.wgsl");
/// F16's and BF16's loads of a half unit: one copy for both decoders.
const HALF_WORDS: ShaderFile = shader_file!("formats/half_words.wgsl");
/// Q5_0's and Q5_1's 5-bit codes: one copy for both decoders and dot files.
const Q5_CODES: ShaderFile = shader_file!("formats/q5_codes.wgsl");
/// Q4_K's and Q5_K's 6-bit (scale, min) pairs, regrouped at upload: one copy for both decoders
/// and dot files.
const SCALES_K4: ShaderFile = shader_file!("formats/scales_k4.wgsl");

impl GpuFormat {
    /// Every format, in the order the tables list them.
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

    /// Its GGML type.
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

    /// Its block format, for `rullama-quant`.
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
            GpuFormat::F32 => &[&F32, &DECODE_HALF],
            GpuFormat::F16 => &[&HALF_WORDS, &F16, &DECODE_HALF],
            GpuFormat::Bf16 => &[&HALF_WORDS, &BF16, &DECODE_HALF],
            GpuFormat::Q8_0 => &[&Q8_0, &DECODE_HALF],
            GpuFormat::Q4_0 => &[&Q4_0, &DECODE_HALF],
            GpuFormat::Q4_1 => &[&Q4_1, &DECODE_HALF],
            GpuFormat::Q5_0 => &[&Q5_CODES, &Q5_0, &DECODE_HALF],
            GpuFormat::Q5_1 => &[&Q5_CODES, &Q5_1, &DECODE_HALF],
            GpuFormat::Q2K => &[&Q2K, &DECODE_HALF],
            GpuFormat::Q3K => &[&Q3K, &DECODE_HALF],
            GpuFormat::Q4K => &[&SCALES_K4, &Q4K, &DECODE_HALF],
            GpuFormat::Q5K => &[&SCALES_K4, &Q5K, &DECODE_HALF],
            GpuFormat::Q6K => &[&Q6K, &DECODE_HALF],
        }
    }

    /// The fields of a block, in plane order, when the format is stored split by field:
    /// plane `k` holds field `k` (`PLANES[k]`) of every block of a chunk, one after another.
    /// `None`: the GPU keeps GGUF's layout. Plane 0, the quants, is a multiple of 16 bytes
    /// per block; the WGSL decoders (`formats/<type>.wgsl`) read these planes.
    pub fn planes(self) -> Option<&'static [BlockField]> {
        const fn f(offset: usize, bytes: usize) -> BlockField {
            BlockField { offset, bytes }
        }
        const Q8_0_FIELDS: &[BlockField] = &[f(2, 32), f(0, 2)]; // q[32] | d
        const Q4_0_FIELDS: &[BlockField] = &[f(2, 16), f(0, 2)]; // qs[16] | d
        const Q4_1_FIELDS: &[BlockField] = &[f(4, 16), f(0, 4)]; // qs[16] | (d, m)
        const Q5_0_FIELDS: &[BlockField] = &[f(6, 16), f(2, 4), f(0, 2)]; // qs[16] | qh | d
        const Q6K_FIELDS: &[BlockField] = &[f(0, 192), f(192, 16), f(208, 2)]; // ql qh | scales | d
        match self {
            GpuFormat::Q8_0 => Some(Q8_0_FIELDS),
            GpuFormat::Q4_0 => Some(Q4_0_FIELDS),
            GpuFormat::Q4_1 => Some(Q4_1_FIELDS),
            GpuFormat::Q5_0 => Some(Q5_0_FIELDS),
            GpuFormat::Q6K => Some(Q6K_FIELDS),
            _ => None,
        }
    }

    /// Whether the GPU holds the block's 6-bit scales and mins regrouped
    /// ([`crate::layout::regroup_scales_k4`]; WGSL `formats/scales_k4.wgsl`): Q4_K and Q5_K,
    /// whose blocks otherwise keep GGUF's layout (144 and 176 bytes: 16-byte aligned already).
    pub fn regroups_scales(self) -> bool {
        matches!(self, GpuFormat::Q4K | GpuFormat::Q5K)
    }

    /// GGML's name of it (`Q4_K`).
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
