//! One error type for reading, querying and writing GGUF.
//!
//! Every variant that comes from the bytes of a file names the byte offset where the reader
//! was when it gave up, and the key or tensor it was reading, so a report on a broken file
//! can be checked with a hex dump. Errors from a file opened by path arrive wrapped in
//! [`GgufError::InFile`]; [`GgufError::kind`] looks through that wrapper.

use std::path::PathBuf;

use crate::{GgmlType, Value};

pub type Result<T, E = GgufError> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum GgufError {
    /// Any other error, raised while reading or writing the file at `path`.
    #[error("{}: {error}", path.display())]
    InFile {
        path: PathBuf,
        error: Box<GgufError>,
    },

    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),

    #[error("truncated: {what} at offset {offset} needs {needed} bytes, the file has {file_len}")]
    Truncated {
        offset: u64,
        needed: u64,
        file_len: u64,
        what: &'static str,
    },

    /// A read from a source that is not in memory failed (a file read in ranges that
    /// shrank, a disk error).
    #[error("offset {offset}: reading {what} ({needed} bytes) failed: {error}")]
    Read {
        offset: u64,
        needed: u64,
        what: &'static str,
        error: std::io::Error,
    },

    /// Reading a tensor's data failed: the file shrank after its header was read, or the
    /// disk failed. `offset` is the data's offset in the file.
    #[error("tensor `{tensor}`: reading {n_bytes} bytes at offset {offset} failed: {error}")]
    TensorRead {
        tensor: String,
        offset: u64,
        n_bytes: u64,
        error: std::io::Error,
    },

    #[error("offset 0: bad magic {found:02x?}, expected \"GGUF\"")]
    BadMagic { found: [u8; 4] },

    #[error(
        "offset 4: version field {version:#010x} looks big-endian; only little-endian GGUF is supported"
    )]
    BigEndian { version: u32 },

    #[error("offset 4: GGUF version {version} is not supported (versions 2 and 3 are)")]
    UnsupportedVersion { version: u32 },

    #[error("offset {offset}: {what} is not valid UTF-8")]
    InvalidUtf8 { offset: u64, what: String },

    #[error("offset {offset}: key `{key}` has unknown value type {type_id}")]
    UnknownValueType {
        offset: u64,
        key: String,
        type_id: u32,
    },

    #[error("offset {offset}: key `{key}` holds bool byte {byte}, which is neither 0 nor 1")]
    InvalidBool { offset: u64, key: String, byte: u8 },

    #[error("offset {offset}: key `{key}` nests arrays deeper than {max} levels")]
    NestingTooDeep {
        offset: u64,
        key: String,
        max: usize,
    },

    #[error("offset {offset}: duplicate key `{key}`")]
    DuplicateKey { offset: u64, key: String },

    #[error(
        "offset {offset}: {what} count {count} needs at least {min_bytes} bytes, only {remaining} remain"
    )]
    CountTooLarge {
        offset: u64,
        what: String,
        count: u64,
        min_bytes: u128,
        remaining: u64,
    },

    #[error("offset {offset}: general.alignment must be a nonzero power of two u32, found {found}")]
    BadAlignment { offset: u64, found: String },

    #[error("offset {offset}: tensor `{tensor}`: {error}")]
    TensorShape {
        offset: u64,
        tensor: String,
        error: ShapeError,
    },

    #[error("offset {offset}: tensor `{tensor}` has unknown type id {type_id}")]
    UnknownTensorType {
        offset: u64,
        tensor: String,
        type_id: u32,
    },

    #[error("offset {offset}: duplicate tensor name `{tensor}`")]
    DuplicateTensor { offset: u64, tensor: String },

    #[error(
        "offset {offset}: tensor `{tensor}` data offset {data_offset} is not a multiple of the alignment {alignment}"
    )]
    MisalignedTensor {
        offset: u64,
        tensor: String,
        data_offset: u64,
        alignment: u64,
    },

    #[error(
        "offset {offset}: tensor `{tensor}` occupies bytes {start}..{start}+{n_bytes}, past the end of the file ({file_len} bytes)"
    )]
    TensorOutOfBounds {
        offset: u64,
        tensor: String,
        start: u64,
        n_bytes: u64,
        file_len: u64,
    },

    #[error("no metadata key `{key}`")]
    MissingKey { key: String },

    #[error("key `{key}` should be {expected}, found {found}")]
    WrongType {
        key: String,
        expected: &'static str,
        found: String,
    },

    #[error("tensor `{tensor}`: {error}")]
    InvalidTensor { tensor: String, error: ShapeError },

    #[error("tensor `{tensor}`: {got} bytes of data given, its shape and type need {expected}")]
    TensorDataSize {
        tensor: String,
        expected: u64,
        got: u64,
    },

    #[error("tensor `{tensor}` added twice")]
    TensorAddedTwice { tensor: String },

    #[error("tensor stream: {declared} tensors declared, data for {written} given")]
    StreamTensorCount { declared: usize, written: usize },
}

/// What is wrong with a tensor's dimensions, found by the reader or the writer alike.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShapeError {
    #[error("{n_dims} dimensions, GGML allows 1 to {max}", max = crate::tensor::MAX_DIMS)]
    DimCount { n_dims: u64 },
    #[error("dimensions {dims:?} include a zero")]
    ZeroDim { dims: Vec<u64> },
    #[error("dimensions {dims:?} hold more than 2^63-1 elements")]
    Overflow { dims: Vec<u64> },
    #[error("row length {dim0} is not a multiple of {ggml_type}'s block size {block_size}")]
    NotWholeBlocks {
        ggml_type: GgmlType,
        dim0: u64,
        block_size: u64,
    },
}

impl GgufError {
    /// The error itself, looking through [`GgufError::InFile`].
    pub fn kind(&self) -> &GgufError {
        match self {
            GgufError::InFile { error, .. } => error.kind(),
            e => e,
        }
    }

    /// This error, wrapped in [`GgufError::InFile`] naming `path` (unless it names one already).
    pub fn in_file(self, path: impl Into<PathBuf>) -> GgufError {
        match self {
            e @ GgufError::InFile { .. } => e,
            e => GgufError::InFile {
                path: path.into(),
                error: Box::new(e),
            },
        }
    }

    pub(crate) fn wrong_type(key: &str, expected: &'static str, found: &Value) -> Self {
        GgufError::WrongType {
            key: key.to_string(),
            expected,
            found: found.describe(),
        }
    }
}
