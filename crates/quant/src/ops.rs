//! Runtime dispatch: a [`Format`] picks its [`BlockFormat`] once, in [`FormatOps::of`] (the
//! one `match`), and everything else is a generic row loop over blocks.

use rullama_gguf::{BlockLayout, GgmlType};

use crate::{BlockFormat, Format, QuantError};
use crate::{float, iq4_nl, iq4_xs, kquants, nf4, q1_0_g128, q4_0, q4_1, q5_0, q5_1, q8_0, q8_1};

/// One format's row functions (llama.cpp's `type_traits` entry), resolved from a [`Format`].
#[derive(Debug, Clone, Copy)]
pub struct FormatOps {
    format: Format,
    layout: BlockLayout,
    dequantize: fn(&[u8], &mut [f32]),
    quantize: fn(&[f32], &mut [u8]),
    dot: fn(&[u8], &[f32]) -> f32,
}

fn dequantize_blocks<F: BlockFormat>(bytes: &[u8], out: &mut [f32]) {
    let blocks = bytes
        .chunks_exact(F::BLOCK_BYTES)
        .zip(out.chunks_exact_mut(F::BLOCK_SIZE));
    blocks.for_each(|(b, o)| F::dequantize_block(b, o));
}

fn quantize_blocks<F: BlockFormat>(x: &[f32], out: &mut [u8]) {
    let blocks = x
        .chunks_exact(F::BLOCK_SIZE)
        .zip(out.chunks_exact_mut(F::BLOCK_BYTES));
    blocks.for_each(|(x, b)| F::quantize_block(x, b));
}

fn dot_blocks<F: BlockFormat>(bytes: &[u8], x: &[f32]) -> f32 {
    let blocks = bytes
        .chunks_exact(F::BLOCK_BYTES)
        .zip(x.chunks_exact(F::BLOCK_SIZE));
    blocks.map(|(b, x)| F::dot_block(b, x)).sum()
}

impl FormatOps {
    fn new<F: BlockFormat>() -> Self {
        let layout = BlockLayout {
            block_size: F::BLOCK_SIZE,
            type_size: F::BLOCK_BYTES,
        };
        debug_assert_eq!(layout, block_layout(F::FORMAT), "{}", F::FORMAT);
        FormatOps {
            format: F::FORMAT,
            layout,
            dequantize: dequantize_blocks::<F>,
            quantize: quantize_blocks::<F>,
            dot: dot_blocks::<F>,
        }
    }

    /// The functions of `format`, or [`QuantError::Unsupported`].
    pub fn of(format: Format) -> Result<Self, QuantError> {
        use GgmlType::*;
        let t = match format {
            Format::Nf4 => return Ok(Self::new::<nf4::Nf4>()),
            Format::Ggml(t) => t,
        };
        Ok(match t {
            F32 => Self::new::<float::F32>(),
            F16 => Self::new::<float::F16>(),
            Bf16 => Self::new::<float::Bf16>(),
            Q4_0 => Self::new::<q4_0::Q4_0>(),
            Q4_1 => Self::new::<q4_1::Q4_1>(),
            Q5_0 => Self::new::<q5_0::Q5_0>(),
            Q5_1 => Self::new::<q5_1::Q5_1>(),
            Q8_0 => Self::new::<q8_0::Q8_0>(),
            Q8_1 => Self::new::<q8_1::Q8_1>(),
            Iq4Nl => Self::new::<iq4_nl::Iq4Nl>(),
            Iq4Xs => Self::new::<iq4_xs::Iq4Xs>(),
            Q1_0G128 => Self::new::<q1_0_g128::Q1_0G128>(),
            Q2K => Self::new::<kquants::Q2K>(),
            Q3K => Self::new::<kquants::Q3K>(),
            Q4K => Self::new::<kquants::Q4K>(),
            Q5K => Self::new::<kquants::Q5K>(),
            Q6K => Self::new::<kquants::Q6K>(),
            Q8K => Self::new::<kquants::Q8K>(),
            Iq2Xxs | Iq2Xs | Iq2S | Iq3Xxs | Iq3S | Iq1S | Iq1M | Tq1_0 | Tq2_0 | Mxfp4 | Nvfp4
            | I8 | I16 | I32 | I64 | F64 => return Err(QuantError::Unsupported(format)),
        })
    }

    /// The format it handles.
    pub fn format(&self) -> Format {
        self.format
    }

    /// Its block geometry.
    pub fn layout(&self) -> BlockLayout {
        self.layout
    }

    /// The number of whole blocks in `bytes`.
    fn blocks_in_bytes(&self, bytes: usize) -> Result<usize, QuantError> {
        let block_bytes = self.layout.type_size;
        if !bytes.is_multiple_of(block_bytes) {
            return Err(QuantError::PartialBlockBytes {
                format: self.format,
                bytes,
                block_bytes,
            });
        }
        Ok(bytes / block_bytes)
    }

    /// Check that `values` f32s are exactly what `bytes` bytes of blocks hold.
    fn check_values(&self, bytes: usize, values: usize) -> Result<(), QuantError> {
        let expected = self.blocks_in_bytes(bytes)? * self.layout.block_size;
        if values != expected {
            let format = self.format;
            return Err(QuantError::ValueCount {
                format,
                bytes,
                expected,
                actual: values,
            });
        }
        Ok(())
    }

    /// Decode whole blocks; `out` must hold exactly the weights of `bytes`.
    pub fn dequantize(&self, bytes: &[u8], out: &mut [f32]) -> Result<(), QuantError> {
        self.check_values(bytes.len(), out.len())?;
        (self.dequantize)(bytes, out);
        Ok(())
    }

    /// Encode `x`, whose length must be a whole number of blocks.
    pub fn quantize(&self, x: &[f32]) -> Result<Vec<u8>, QuantError> {
        let BlockLayout {
            block_size,
            type_size,
        } = self.layout;
        if !x.len().is_multiple_of(block_size) {
            let format = self.format;
            return Err(QuantError::PartialBlockValues {
                format,
                values: x.len(),
                block_size,
            });
        }
        let mut out = vec![0u8; x.len() / block_size * type_size];
        (self.quantize)(x, &mut out);
        Ok(out)
    }

    /// Encode `x` into `out`, which must be exactly the bytes of `x`'s blocks: a caller that
    /// quantizes a model chunk by chunk (or thread by thread) reuses its buffers.
    pub fn quantize_into(&self, x: &[f32], out: &mut [u8]) -> Result<(), QuantError> {
        self.check_values(out.len(), x.len())?;
        (self.quantize)(x, out);
        Ok(())
    }

    /// `sum_i w_i x_i` for the weights `w` in `bytes`; `x` must match them in length.
    pub fn dot(&self, bytes: &[u8], x: &[f32]) -> Result<f32, QuantError> {
        self.check_values(bytes.len(), x.len())?;
        Ok((self.dot)(bytes, x))
    }
}

/// Weights per block and bytes per block; known for every format, supported or not.
pub fn block_layout(format: Format) -> BlockLayout {
    match format {
        Format::Ggml(t) => t.layout(),
        Format::Nf4 => BlockLayout {
            block_size: 64,
            type_size: 36,
        },
    }
}

/// Whether this crate can dequantize, quantize and dot `format`.
pub fn is_supported(format: Format) -> bool {
    FormatOps::of(format).is_ok()
}

/// Decode `bytes` (whole blocks) into `out` (exactly their weights).
pub fn dequantize(format: Format, bytes: &[u8], out: &mut [f32]) -> Result<(), QuantError> {
    FormatOps::of(format)?.dequantize(bytes, out)
}

/// Decode `bytes` (whole blocks) into a new vector.
pub fn dequantize_to_vec(format: Format, bytes: &[u8]) -> Result<Vec<f32>, QuantError> {
    let ops = FormatOps::of(format)?;
    let mut out = vec![0.0; ops.blocks_in_bytes(bytes.len())? * ops.layout.block_size];
    ops.dequantize(bytes, &mut out)?;
    Ok(out)
}

/// Encode `x` (a whole number of blocks) the way llama.cpp's reference quantizers do.
pub fn quantize(format: Format, x: &[f32]) -> Result<Vec<u8>, QuantError> {
    FormatOps::of(format)?.quantize(x)
}

/// `sum_i w_i x_i` for one row of weights stored in `bytes`.
pub fn dot(format: Format, bytes: &[u8], x: &[f32]) -> Result<f32, QuantError> {
    FormatOps::of(format)?.dot(bytes, x)
}
