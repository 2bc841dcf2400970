//! GGUF: the file format of llama.cpp and Ollama.
//!
//! A file is read through a [`ByteSource`]: a buffer, a memory map ([`GgufFile::open`]:
//! zero-copy tensor views that borrow the map) or a file read in ranges
//! ([`GgufFile::open_ranged`]: the header, then each tensor when asked, so a file that
//! shrinks meanwhile is an error, not a fault). Every offset and count read from the file is
//! checked against the source's size before it is used, so a hostile file yields a
//! [`GgufError`] naming the offset.
//! [`GgufWriter`] writes files from scratch or writes a parsed file back byte for byte;
//! [`TensorStream`] writes one tensor at a time, for files larger than memory.

mod decode;
mod encode;
mod error;
mod file;
mod ggml_type;
mod header;
mod metadata;
#[cfg(not(target_arch = "wasm32"))]
mod ranged;
mod reader;
mod source;
pub mod store;
mod stream;
mod tensor;
mod value;
mod writer;

pub use decode::MAX_ARRAY_DEPTH;
pub use error::{GgufError, Result, ShapeError};
pub use file::{DefaultSource, GgufFile};
pub use ggml_type::{BlockLayout, GgmlType};
pub use header::{ALIGNMENT_KEY, DEFAULT_ALIGNMENT, GgufHeader, MAGIC};
pub use metadata::{FromValue, Metadata};
#[cfg(not(target_arch = "wasm32"))]
pub use ranged::RangedFile;
pub use source::ByteSource;
pub use stream::TensorStream;
pub use tensor::{MAX_DIMS, TensorData, TensorInfo, TensorView};
pub use value::{Array, Value, ValueType};
pub use writer::GgufWriter;
