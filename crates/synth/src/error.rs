//! What can go wrong while synthesizing a model: the files it reads and writes.

use std::path::PathBuf;

use rullama_gguf::{GgufError, ShapeError};

pub type Result<T, E = SynthError> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum SynthError {
    /// A GGUF file read for its tokenizer, or the model being written.
    #[error(transparent)]
    Gguf(#[from] GgufError),

    #[error("{}: {error}", path.display())]
    Io {
        path: PathBuf,
        error: std::io::Error,
    },

    /// The file meant to lend its tokenizer has none.
    #[error("{}: no tokenizer: {error}", path.display())]
    NoTokenizer { path: PathBuf, error: GgufError },

    /// A preset's tensor that GGML cannot hold (a preset table error).
    #[error("tensor `{tensor}`: {error}")]
    Shape { tensor: String, error: ShapeError },
}
