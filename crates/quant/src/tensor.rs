//! Whole tensors and single rows, on plain `(type, bytes, dims)` so that any tensor view works.
//!
//! GGUF dims are GGML's `ne`: `dims[0]` is the row length (contiguous), the rest count rows.

use crate::ops::FormatOps;
use crate::{Format, QuantError};

/// Bytes in one row of `row_len` weights.
pub fn row_bytes(format: Format, row_len: usize) -> Result<usize, QuantError> {
    let layout = crate::block_layout(format);
    if !row_len.is_multiple_of(layout.block_size) {
        let block_size = layout.block_size;
        return Err(QuantError::PartialBlockValues {
            format,
            values: row_len,
            block_size,
        });
    }
    Ok(row_len / layout.block_size * layout.type_size)
}

/// Decode row `row` of a tensor whose rows hold `row_len` weights each.
pub fn dequantize_row(
    format: Format,
    data: &[u8],
    row_len: usize,
    row: usize,
) -> Result<Vec<f32>, QuantError> {
    let ops = FormatOps::of(format)?;
    let bytes = row_bytes(format, row_len)?;
    let rows = data.len().checked_div(bytes).unwrap_or(0);
    if row >= rows {
        return Err(QuantError::RowOutOfRange { row, rows });
    }
    let mut out = vec![0.0; row_len];
    ops.dequantize(&data[row * bytes..(row + 1) * bytes], &mut out)?;
    Ok(out)
}

/// Decode a whole tensor of shape `dims`; `data` must be exactly its bytes.
pub fn dequantize_tensor(
    format: Format,
    data: &[u8],
    dims: &[u64],
) -> Result<Vec<f32>, QuantError> {
    let ops = FormatOps::of(format)?;
    let bad = || QuantError::BadDims {
        dims: dims.to_vec(),
    };
    let elements = dims
        .iter()
        .try_fold(1u64, |n, &d| n.checked_mul(d))
        .ok_or_else(bad)?;
    let row_len = usize::try_from(*dims.first().ok_or_else(bad)?).map_err(|_| bad())?;
    row_bytes(format, row_len)?;
    let layout = ops.layout();
    let expected = (elements / layout.block_size as u64).checked_mul(layout.type_size as u64);
    let expected = expected.ok_or_else(bad)?;
    if expected != data.len() as u64 {
        return Err(QuantError::TensorBytes {
            format,
            elements,
            expected,
            actual: data.len(),
        });
    }
    crate::dequantize_to_vec(format, data)
}
