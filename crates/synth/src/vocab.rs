//! The tokenizer of a synthetic model: every `tokenizer.*` key of a real GGUF of the same
//! family, copied as is, so llama.cpp and rullama build the real tokenizer from it (or the
//! keys of a synthetic tokenizer, `tokenizer/`). A vocab-only file (like llama.cpp's
//! `models/ggml-vocab-*.gguf`) holds just those keys and the source's `general.*`
//! description: a few MB to carry to another machine instead of the whole model.

use std::path::Path;

use rullama_gguf::{GgufError, GgufFile, GgufWriter, Metadata, Value};

use crate::error::{Result, SynthError};

const TOKENS: &str = "tokenizer.ggml.tokens";

/// The `tokenizer.*` keys of a GGUF file, in file order.
#[derive(Debug, Clone)]
pub struct Vocab {
    /// `general.architecture` of the file they came from.
    pub source_arch: Option<String>,
    /// The keys and their values.
    pub keys: Vec<(String, Value)>,
    /// Tokens in the vocabulary (the length of `tokenizer.ggml.tokens`).
    pub n_tokens: usize,
}

impl Vocab {
    /// The `tokenizer.*` keys of `meta`; an error when it has no token list.
    pub fn from_metadata(meta: &Metadata) -> Result<Vocab, GgufError> {
        let n_tokens = meta.get_array(TOKENS)?.len();
        let keys = meta
            .iter()
            .filter(|(k, _)| k.starts_with("tokenizer."))
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect();
        let source_arch = meta.architecture().ok().map(str::to_string);
        Ok(Vocab {
            source_arch,
            keys,
            n_tokens,
        })
    }

    /// The tokenizer of the GGUF at `path` (a model or a vocab-only file).
    pub fn open(path: &Path) -> Result<Vocab> {
        let file = GgufFile::open(path)?;
        Vocab::of_file(path, file.metadata())
    }

    /// [`Vocab::from_metadata`] of the file at `path`, the error naming it.
    fn of_file(path: &Path, meta: &Metadata) -> Result<Vocab> {
        Vocab::from_metadata(meta).map_err(|error| SynthError::NoTokenizer {
            path: path.to_path_buf(),
            error,
        })
    }
}

/// Keys of the source's `general.*` that describe its tensors, which a vocab-only file has
/// none of.
const TENSOR_KEYS: [&str; 3] = [
    "general.file_type",
    "general.quantization_version",
    "general.alignment",
];

/// Write `out` with the `general.*` and `tokenizer.*` keys of `tokenizer` and no tensors;
/// returns the bytes written.
pub fn write_vocab_only(tokenizer: &Path, out: &Path) -> Result<u64> {
    let file = GgufFile::open(tokenizer)?;
    let meta = file.metadata();
    Vocab::of_file(tokenizer, meta)?;
    let mut w = GgufWriter::new();
    for (key, value) in meta.iter() {
        let general = key.starts_with("general.") && !TENSOR_KEYS.contains(&key);
        if general || key.starts_with("tokenizer.") {
            w.set(key, value.clone());
        }
    }
    Ok(w.write_to_path(out)?)
}
