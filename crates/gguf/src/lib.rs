//! GGUF: the file format of llama.cpp and Ollama.
//!
//! Reading is zero-copy: [`GgufFile::open`] maps the file and hands out tensor views that
//! borrow the map. Every offset and count read from the file is checked against the file's
//! size before it is used, so a hostile file yields a [`GgufError`] naming the offset.

mod ggml_type;

pub use ggml_type::{BlockLayout, GgmlType};
