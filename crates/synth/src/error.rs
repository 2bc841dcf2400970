//! What can go wrong while synthesizing a model: the files it reads and writes.

use std::path::PathBuf;

use rullama_gguf::{GgufError, ShapeError};

/// This crate's results: a [`SynthError`] unless said otherwise.
pub type Result<T, E = SynthError> = std::result::Result<T, E>;

/// What can stop a synthetic file from being written.
#[derive(Debug, thiserror::Error)]
pub enum SynthError {
    /// A GGUF file read for its tokenizer, or the model being written.
    #[error(transparent)]
    Gguf(#[from] GgufError),

    /// Creating or writing the output file failed.
    #[error("{}: {error}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        error: std::io::Error,
    },

    /// The file meant to lend its tokenizer has none.
    #[error("{}: no tokenizer: {error}", path.display())]
    NoTokenizer {
        /// The file.
        path: PathBuf,
        /// Why its tokenizer keys could not be read.
        error: GgufError,
    },

    /// A preset's tensor that GGML cannot hold (a preset table error).
    #[error("tensor `{tensor}`: {error}")]
    Shape {
        /// The tensor.
        tensor: String,
        /// What is wrong with its dims.
        error: ShapeError,
    },

    /// A preset whose rows the mix cannot type (a preset table error).
    #[error(transparent)]
    Mix(#[from] rullama_quant::mix::MixError),

    /// A tensor an adapter was asked for is not in the model.
    #[error("no tensor `{0}` in the model")]
    NoTensor(String),

    /// Decoding a base matrix or encoding an adapter's.
    #[error(transparent)]
    Quant(#[from] rullama_quant::QuantError),
}
