//! GGUF: the file format of llama.cpp and Ollama.
//!
//! Reading is zero-copy: [`GgufFile::open`] maps the file and hands out tensor views that
//! borrow the map. Every offset and count read from the file is checked against the file's
//! size before it is used, so a hostile file yields a [`GgufError`] naming the offset.
//! [`GgufWriter`] writes files from scratch or writes a parsed file back byte for byte;
//! [`TensorStream`] writes one tensor at a time, for files larger than memory.

mod decode;
mod encode;
mod error;
mod file;
mod ggml_type;
mod header;
mod metadata;
mod reader;
pub mod store;
mod stream;
mod tensor;
mod value;
mod writer;

pub use decode::MAX_ARRAY_DEPTH;
pub use error::{GgufError, Result, ShapeError};
pub use file::GgufFile;
pub use ggml_type::{BlockLayout, GgmlType};
pub use header::{ALIGNMENT_KEY, DEFAULT_ALIGNMENT, GgufHeader, MAGIC};
pub use metadata::{FromValue, Metadata};
pub use stream::TensorStream;
pub use tensor::{MAX_DIMS, TensorInfo, TensorView};
pub use value::{Array, Value, ValueType};
pub use writer::GgufWriter;
