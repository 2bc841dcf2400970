//! One error type for reading, querying and writing GGUF.
//!
//! Every variant that comes from the bytes of a file names the byte offset where the reader
//! was when it gave up, and the key or tensor it was reading, so a report on a broken file
//! can be checked with a hex dump. Errors from a file opened by path arrive wrapped in
//! [`GgufError::InFile`]; [`GgufError::kind`] looks through that wrapper.

use std::path::PathBuf;

use crate::{GgmlType, Value};

/// This crate's results: a [`GgufError`] unless said otherwise.
pub type Result<T, E = GgufError> = std::result::Result<T, E>;

/// Everything that can go wrong reading, querying or writing a GGUF file.
///
/// Variants found in a file's bytes name the byte `offset` where the reader stopped and the
/// key or tensor it was reading; the rest name the key or tensor a caller asked for.
#[derive(Debug, thiserror::Error)]
pub enum GgufError {
    /// Any other error, raised while reading or writing the file at `path`.
    #[error("{}: {error}", path.display())]
    InFile {
        /// The file being read or written.
        path: PathBuf,
        /// What went wrong in it.
        error: Box<GgufError>,
    },

    /// An I/O error outside the reading of a byte range (opening, mapping, writing).
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),

    /// The file ends before a structure the header declares.
    #[error("truncated: {what} at offset {offset} needs {needed} bytes, the file has {file_len}")]
    Truncated {
        /// Where the structure starts.
        offset: u64,
        /// Bytes it needs from there.
        needed: u64,
        /// Bytes the file has in all.
        file_len: u64,
        /// What was being read.
        what: &'static str,
    },

    /// A read from a source that is not in memory failed (a file read in ranges that
    /// shrank, a disk error).
    #[error("offset {offset}: reading {what} ({needed} bytes) failed: {error}")]
    Read {
        /// Where the read started.
        offset: u64,
        /// Bytes asked for.
        needed: u64,
        /// What was being read.
        what: &'static str,
        /// The source's error.
        error: std::io::Error,
    },

    /// Reading a tensor's data failed: the file shrank after its header was read, or the
    /// disk failed. `offset` is the data's offset in the file.
    #[error("tensor `{tensor}`: reading {n_bytes} bytes at offset {offset} failed: {error}")]
    TensorRead {
        /// The tensor's name.
        tensor: String,
        /// Where its data starts in the file.
        offset: u64,
        /// Bytes of its data.
        n_bytes: u64,
        /// The source's error.
        error: std::io::Error,
    },

    /// The first four bytes are not `GGUF`: not a GGUF file.
    #[error("offset 0: bad magic {found:02x?}, expected \"GGUF\"")]
    BadMagic {
        /// The bytes found instead.
        found: [u8; 4],
    },

    /// The version field reads, little-endian, as a multiple of 2^16: a big-endian file's
    /// small version number (llama.cpp's test). Only little-endian files are decoded.
    #[error(
        "offset 4: version field {version:#010x} looks big-endian; only little-endian GGUF is supported"
    )]
    BigEndian {
        /// The version field as read (little-endian).
        version: u32,
    },

    /// A GGUF version other than 2 or 3, in a file or asked of the writer (version 1 had
    /// 32-bit counts and is not read).
    #[error("offset 4: GGUF version {version} is not supported (versions 2 and 3 are)")]
    UnsupportedVersion {
        /// The version field.
        version: u32,
    },

    /// A string (a key, a value or a tensor name) that is not UTF-8.
    #[error("offset {offset}: {what} is not valid UTF-8")]
    InvalidUtf8 {
        /// Where the string's bytes start.
        offset: u64,
        /// Which string it is.
        what: String,
    },

    /// A metadata value type id outside GGUF's 0..=12.
    #[error("offset {offset}: key `{key}` has unknown value type {type_id}")]
    UnknownValueType {
        /// Where the type id is.
        offset: u64,
        /// The key whose value it types.
        key: String,
        /// The id found.
        type_id: u32,
    },

    /// A bool value stored as a byte other than 0 or 1.
    #[error("offset {offset}: key `{key}` holds bool byte {byte}, which is neither 0 nor 1")]
    InvalidBool {
        /// Where the byte is.
        offset: u64,
        /// The key it belongs to.
        key: String,
        /// The byte found.
        byte: u8,
    },

    /// Arrays of arrays nested past [`crate::MAX_ARRAY_DEPTH`]: refused so that a hostile
    /// file cannot exhaust the stack.
    #[error("offset {offset}: key `{key}` nests arrays deeper than {max} levels")]
    NestingTooDeep {
        /// Where the array that goes too deep starts.
        offset: u64,
        /// The key it belongs to.
        key: String,
        /// The deepest nesting allowed.
        max: usize,
    },

    /// The same metadata key twice: which one a reader would take is undefined.
    #[error("offset {offset}: duplicate key `{key}`")]
    DuplicateKey {
        /// Where the second one starts.
        offset: u64,
        /// The key.
        key: String,
    },

    /// A count (keys, tensors, array elements, string bytes) that the rest of the file
    /// cannot hold even at the smallest size per item: refused before anything is
    /// allocated for it.
    #[error(
        "offset {offset}: {what} count {count} needs at least {min_bytes} bytes, only {remaining} remain"
    )]
    CountTooLarge {
        /// Where the count is.
        offset: u64,
        /// What it counts.
        what: String,
        /// The count found.
        count: u64,
        /// The fewest bytes that many items take.
        min_bytes: u128,
        /// Bytes left in the file after the count.
        remaining: u64,
    },

    /// `general.alignment` that is not a nonzero power of two stored as a u32.
    #[error("offset {offset}: general.alignment must be a nonzero power of two u32, found {found}")]
    BadAlignment {
        /// Where the value is.
        offset: u64,
        /// The value found, described.
        found: String,
    },

    /// A tensor info whose dimensions GGML cannot hold.
    #[error("offset {offset}: tensor `{tensor}`: {error}")]
    TensorShape {
        /// Where the tensor info starts.
        offset: u64,
        /// The tensor's name.
        tensor: String,
        /// What is wrong with its dimensions.
        error: ShapeError,
    },

    /// A tensor type id that [`GgmlType`] does not know (a retired or a future type).
    #[error("offset {offset}: tensor `{tensor}` has unknown type id {type_id}")]
    UnknownTensorType {
        /// Where the type id is.
        offset: u64,
        /// The tensor's name.
        tensor: String,
        /// The id found.
        type_id: u32,
    },

    /// Two tensors of the same name.
    #[error("offset {offset}: duplicate tensor name `{tensor}`")]
    DuplicateTensor {
        /// Where the second tensor info starts.
        offset: u64,
        /// The name.
        tensor: String,
    },

    /// A tensor whose data does not start on the file's alignment.
    #[error(
        "offset {offset}: tensor `{tensor}` data offset {data_offset} is not a multiple of the alignment {alignment}"
    )]
    MisalignedTensor {
        /// Where the tensor info starts.
        offset: u64,
        /// The tensor's name.
        tensor: String,
        /// Its data offset, from the start of the data section.
        data_offset: u64,
        /// The file's alignment.
        alignment: u64,
    },

    /// A tensor whose data runs past the end of the file.
    #[error(
        "offset {offset}: tensor `{tensor}` occupies bytes {start}..{start}+{n_bytes}, past the end of the file ({file_len} bytes)"
    )]
    TensorOutOfBounds {
        /// Where the tensor info starts.
        offset: u64,
        /// The tensor's name.
        tensor: String,
        /// Where its data starts in the file.
        start: u64,
        /// Bytes its shape and type need.
        n_bytes: u64,
        /// Bytes the file has.
        file_len: u64,
    },

    /// A metadata key a caller asked for is absent.
    #[error("no metadata key `{key}`")]
    MissingKey {
        /// The key.
        key: String,
    },

    /// A metadata value of another type than the caller asked for.
    #[error("key `{key}` should be {expected}, found {found}")]
    WrongType {
        /// The key.
        key: String,
        /// The type asked for.
        expected: &'static str,
        /// The value found, described.
        found: String,
    },

    /// A tensor given to the writer with dimensions GGML cannot hold.
    #[error("tensor `{tensor}`: {error}")]
    InvalidTensor {
        /// The tensor's name.
        tensor: String,
        /// What is wrong with its dimensions.
        error: ShapeError,
    },

    /// A tensor given to the writer with more or fewer bytes than its shape and type take.
    #[error("tensor `{tensor}`: {got} bytes of data given, its shape and type need {expected}")]
    TensorDataSize {
        /// The tensor's name.
        tensor: String,
        /// Bytes its shape and type take.
        expected: u64,
        /// Bytes given.
        got: u64,
    },

    /// The writer was given a second tensor of the same name.
    #[error("tensor `{tensor}` added twice")]
    TensorAddedTwice {
        /// The name.
        tensor: String,
    },

    /// A [`crate::TensorStream`] finished with fewer tensors written than its header
    /// declared, or was given more.
    #[error("tensor stream: {declared} tensors declared, data for {written} given")]
    StreamTensorCount {
        /// Tensors the header declares.
        declared: usize,
        /// Tensors whose data was given.
        written: usize,
    },
}

/// What is wrong with a tensor's dimensions, found by the reader or the writer alike.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShapeError {
    /// No dimensions, or more than [`crate::MAX_DIMS`].
    #[error("{n_dims} dimensions, GGML allows 1 to {max}", max = crate::tensor::MAX_DIMS)]
    DimCount {
        /// The number of dimensions given.
        n_dims: u64,
    },
    /// A dimension of 0: GGML has no empty tensors.
    #[error("dimensions {dims:?} include a zero")]
    ZeroDim {
        /// The dimensions.
        dims: Vec<u64>,
    },
    /// More elements than an i64 counts (GGML's element counts are signed).
    #[error("dimensions {dims:?} hold more than 2^63-1 elements")]
    Overflow {
        /// The dimensions.
        dims: Vec<u64>,
    },
    /// A row that ends inside a block: the type stores whole blocks only.
    #[error("row length {dim0} is not a multiple of {ggml_type}'s block size {block_size}")]
    NotWholeBlocks {
        /// The type.
        ggml_type: GgmlType,
        /// The row length (`dims[0]`).
        dim0: u64,
        /// Weights per block of the type.
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
