//! Tensor descriptions, zero-copy views of their data, and data read from any source.
//!
//! Dimensions are in GGML order: `dims[0]` is the row length (the fastest-varying index), so
//! a `[n_in, n_out]` weight has `n_out` rows of `n_in` values. Rows are whole blocks, as
//! GGML requires for every quantized type, which makes `n_bytes` exact.

use std::borrow::Cow;

use crate::GgmlType;
use crate::error::ShapeError;

/// GGML_MAX_DIMS.
pub const MAX_DIMS: usize = 4;

/// One tensor as the header describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorInfo {
    /// The tensor's name (`blk.0.attn_q.weight`).
    pub name: String,
    /// GGML order: `dims[0]` is the row length. Between 1 and [`MAX_DIMS`] entries, none zero.
    pub dims: Vec<u64>,
    /// How its values are stored.
    pub ggml_type: GgmlType,
    /// Offset of the data from the start of the data section (not of the file).
    pub offset: u64,
    /// The product of `dims`.
    pub n_elements: u64,
    /// Bytes of its data: whole blocks of `ggml_type`.
    pub n_bytes: u64,
}

impl TensorInfo {
    /// Describe a tensor, checking that its shape is one GGML can hold.
    pub fn new(
        name: impl Into<String>,
        dims: &[u64],
        ggml_type: GgmlType,
        offset: u64,
    ) -> Result<TensorInfo, ShapeError> {
        let (n_elements, n_bytes) = shape_size(dims, ggml_type)?;
        Ok(TensorInfo {
            name: name.into(),
            dims: dims.to_vec(),
            ggml_type,
            offset,
            n_elements,
            n_bytes,
        })
    }

    /// Values per row (`dims[0]`).
    pub fn row_len(&self) -> u64 {
        self.dims.first().copied().unwrap_or(1)
    }

    /// Number of rows: the product of every dimension but the first.
    pub fn n_rows(&self) -> u64 {
        self.dims.iter().skip(1).product()
    }

    /// Bytes per row.
    pub fn row_bytes(&self) -> u64 {
        self.n_bytes / self.n_rows().max(1)
    }
}

/// Element count and byte size of a tensor of type `ggml_type` with dimensions `dims`.
pub(crate) fn shape_size(dims: &[u64], ggml_type: GgmlType) -> Result<(u64, u64), ShapeError> {
    if dims.is_empty() || dims.len() > MAX_DIMS {
        return Err(ShapeError::DimCount {
            n_dims: dims.len() as u64,
        });
    }
    if dims.contains(&0) {
        return Err(ShapeError::ZeroDim {
            dims: dims.to_vec(),
        });
    }
    let overflow = || ShapeError::Overflow {
        dims: dims.to_vec(),
    };
    // GGML keeps element counts in int64_t.
    let n_elements = dims
        .iter()
        .try_fold(1u64, |acc, &d| acc.checked_mul(d))
        .filter(|&n| n <= i64::MAX as u64)
        .ok_or_else(overflow)?;
    let block_size = ggml_type.layout().block_size as u64;
    if !dims[0].is_multiple_of(block_size) {
        return Err(ShapeError::NotWholeBlocks {
            ggml_type,
            dim0: dims[0],
            block_size,
        });
    }
    let n_bytes = ggml_type.bytes_for(n_elements).ok_or_else(overflow)?;
    Ok((n_elements, n_bytes))
}

/// A tensor's description and its bytes, borrowed from the file.
#[derive(Debug, Clone, Copy)]
pub struct TensorView<'a> {
    /// Its description.
    pub info: &'a TensorInfo,
    /// Exactly `info.n_bytes` bytes.
    pub data: &'a [u8],
}

/// A tensor's description and its bytes, borrowed from a source held in memory or read into
/// a buffer of their own ([`crate::GgufFile::read_tensor`]).
#[derive(Debug, Clone)]
pub struct TensorData<'a> {
    /// Its description.
    pub info: &'a TensorInfo,
    /// Exactly `info.n_bytes` bytes.
    pub data: Cow<'a, [u8]>,
}

impl TensorData<'_> {
    /// A view of the bytes, for code written over views.
    pub fn view(&self) -> TensorView<'_> {
        TensorView {
            info: self.info,
            data: &self.data,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_follow_block_layout() {
        let t = TensorInfo::new("w", &[256, 3], GgmlType::Q4K, 0).unwrap();
        assert_eq!((t.n_elements, t.n_bytes), (768, 3 * 144));
        assert_eq!((t.row_len(), t.n_rows(), t.row_bytes()), (256, 3, 144));
        let t = TensorInfo::new("b", &[7], GgmlType::F32, 0).unwrap();
        assert_eq!((t.n_elements, t.n_bytes, t.n_rows()), (7, 28, 1));
    }

    #[test]
    fn bad_shapes_are_named() {
        use ShapeError::*;
        let err = |dims: &[u64], t| shape_size(dims, t).unwrap_err();
        assert_eq!(err(&[], GgmlType::F32), DimCount { n_dims: 0 });
        assert_eq!(err(&[1, 1, 1, 1, 1], GgmlType::F32), DimCount { n_dims: 5 });
        assert_eq!(err(&[4, 0], GgmlType::F32), ZeroDim { dims: vec![4, 0] });
        assert_eq!(
            err(&[1 << 32, 1 << 32], GgmlType::F32),
            Overflow {
                dims: vec![1 << 32, 1 << 32]
            }
        );
        // Fits in i64 elements, but not in u64 bytes.
        assert_eq!(
            err(&[1 << 62], GgmlType::F64),
            Overflow {
                dims: vec![1 << 62]
            }
        );
        assert!(matches!(
            err(&[16, 2], GgmlType::Q8_0),
            NotWholeBlocks {
                dim0: 16,
                block_size: 32,
                ..
            }
        ));
    }
}
