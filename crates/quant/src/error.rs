//! What can go wrong when a buffer meets a format.

use crate::Format;

/// A format this crate cannot handle, or buffers whose sizes do not fit the format.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuantError {
    /// A format without a decoder here (the i-quants other than IQ4_NL and IQ4_XS, the
    /// ternary and FP4 types, the plain integers, F64).
    #[error("format {0} is not supported by rullama-quant")]
    Unsupported(Format),
    /// Encoded bytes that end inside a block.
    #[error("{format}: {bytes} bytes is not a whole number of {block_bytes}-byte blocks")]
    PartialBlockBytes {
        /// The format.
        format: Format,
        /// Bytes given.
        bytes: usize,
        /// Bytes per block of the format.
        block_bytes: usize,
    },
    /// Values to encode that end inside a block.
    #[error("{format}: {values} values is not a whole number of {block_size}-value blocks")]
    PartialBlockValues {
        /// The format.
        format: Format,
        /// Values given.
        values: usize,
        /// Values per block of the format.
        block_size: usize,
    },
    /// A value buffer of another length than the encoded bytes hold.
    #[error("{format}: {bytes} bytes hold {expected} values, but the f32 buffer has {actual}")]
    ValueCount {
        /// The format.
        format: Format,
        /// Encoded bytes.
        bytes: usize,
        /// Values they hold.
        expected: usize,
        /// Values the buffer has room for (or holds).
        actual: usize,
    },
    /// Tensor data of another size than its shape and format take.
    #[error(
        "{format}: a tensor of {elements} values takes {expected} bytes, but the data has {actual}"
    )]
    TensorBytes {
        /// The format.
        format: Format,
        /// Values in the tensor.
        elements: u64,
        /// Bytes they take.
        expected: u64,
        /// Bytes given.
        actual: usize,
    },
    /// Tensor dimensions whose product overflows, or that are empty.
    #[error("tensor dimensions {dims:?} overflow or are empty")]
    BadDims {
        /// The dimensions.
        dims: Vec<u64>,
    },
    /// A row index past the tensor's last row.
    #[error("row {row} is out of range: the tensor has {rows} rows")]
    RowOutOfRange {
        /// The row asked for.
        row: usize,
        /// Rows in the tensor.
        rows: usize,
    },
}
