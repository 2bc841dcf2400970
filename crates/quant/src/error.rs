//! What can go wrong when a buffer meets a format.

use crate::Format;

/// A format this crate cannot handle, or buffers whose sizes do not fit the format.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuantError {
    #[error("format {0} is not supported by rullama-quant")]
    Unsupported(Format),
    #[error("{format}: {bytes} bytes is not a whole number of {block_bytes}-byte blocks")]
    PartialBlockBytes {
        format: Format,
        bytes: usize,
        block_bytes: usize,
    },
    #[error("{format}: {values} values is not a whole number of {block_size}-value blocks")]
    PartialBlockValues {
        format: Format,
        values: usize,
        block_size: usize,
    },
    #[error("{format}: {bytes} bytes hold {expected} values, but the f32 buffer has {actual}")]
    ValueCount {
        format: Format,
        bytes: usize,
        expected: usize,
        actual: usize,
    },
    #[error(
        "{format}: a tensor of {elements} values takes {expected} bytes, but the data has {actual}"
    )]
    TensorBytes {
        format: Format,
        elements: u64,
        expected: u64,
        actual: usize,
    },
    #[error("tensor dimensions {dims:?} overflow or are empty")]
    BadDims { dims: Vec<u64> },
    #[error("row {row} is out of range: the tensor has {rows} rows")]
    RowOutOfRange { row: usize, rows: usize },
}
