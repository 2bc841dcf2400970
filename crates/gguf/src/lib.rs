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
//! [`store`] finds models by path, Ollama name or the name of a cached test model.
//!
//! ```rust
//! use rullama_gguf::{GgmlType, GgufFile, GgufWriter};
//!
//! // A file in memory: one metadata key and a 2-row f32 tensor of 4 values a row.
//! let values = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0];
//! let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
//! let mut writer = GgufWriter::new();
//! writer.set("general.architecture", "llama");
//! writer.add_tensor("token_embd.weight", &[4, 2], GgmlType::F32, bytes)?;
//! let mut file_bytes = Vec::new();
//! writer.write_to(&mut file_bytes)?;
//!
//! // Read it back: typed metadata, then each tensor's description and bytes.
//! let file = GgufFile::from_bytes(file_bytes)?;
//! assert_eq!(file.metadata().architecture()?, "llama");
//! for tensor in file.tensor_views() {
//!     let info = tensor.info;
//!     println!("{} {} {:?}: {} bytes", info.name, info.ggml_type, info.dims, tensor.data.len());
//! }
//! let embd = file.tensor("token_embd.weight").expect("written above");
//! assert_eq!((embd.info.row_len(), embd.info.n_rows()), (4, 2));
//! # Ok::<(), rullama_gguf::GgufError>(())
//! ```
//!
//! `examples/list_tensors.rs` lists a file's metadata and tensors
//! (`cargo run -p rullama-gguf --example list_tensors -- model.gguf`).

#![warn(missing_docs)]

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
#[cfg(not(target_arch = "wasm32"))]
mod whole;
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
#[cfg(not(target_arch = "wasm32"))]
pub use whole::write_whole;
pub use writer::GgufWriter;
