//! The tokenizer of a synthetic model: every `tokenizer.*` key of a real GGUF of the same
//! family, copied as is, so llama.cpp and rullama build the real tokenizer from it (or the
//! keys of a synthetic tokenizer, `tokenizer/`). A vocab-only file (like llama.cpp's
//! `models/ggml-vocab-*.gguf`) holds just those keys and the source's `general.*`
//! description: a few MB to carry to another machine instead of the whole model.

use std::path::Path;

use rullama_gguf::{Array, GgufError, GgufFile, GgufWriter, Metadata, Value};

use crate::error::{Result, SynthError};

const TOKENS: &str = "tokenizer.ggml.tokens";

/// llama.cpp's `LLAMA_TOKEN_TYPE_UNUSED`.
const UNUSED: i32 = 5;

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

    /// This vocabulary grown to `n` tokens (if it has fewer) by unused tokens `<unused_i>`
    /// (llama.cpp's token type 5, score 0, as real vocabularies pad theirs): a synthetic
    /// tokenizer of a few hundred tokens then gives the model the real one's embedding and
    /// output rows (Llama 3's 128,256), which a prefill's and a decode's cost depends on.
    pub fn padded_to(mut self, n: usize) -> Vocab {
        let extra = n.saturating_sub(self.n_tokens);
        if extra == 0 {
            return self;
        }
        let first = self.n_tokens;
        for (key, value) in &mut self.keys {
            match (key.as_str(), value) {
                (TOKENS, Value::Array(Array::String(t))) => {
                    t.extend((first..n).map(|i| format!("<unused_{i}>")));
                }
                ("tokenizer.ggml.token_type", Value::Array(Array::I32(t))) => {
                    t.extend(std::iter::repeat_n(UNUSED, extra));
                }
                ("tokenizer.ggml.scores", Value::Array(Array::F32(s))) => {
                    s.extend(std::iter::repeat_n(0.0, extra));
                }
                _ => {}
            }
        }
        self.n_tokens = n;
        self
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::TokenizerStyle;

    #[test]
    fn padding_grows_every_per_token_array() {
        let v = TokenizerStyle::Llama.vocab();
        let n0 = v.n_tokens;
        let v = v.padded_to(n0 + 3);
        assert_eq!(v.n_tokens, n0 + 3);
        let len = |key: &str| match v.keys.iter().find(|(k, _)| k == key) {
            Some((_, Value::Array(Array::String(a)))) => a.len(),
            Some((_, Value::Array(Array::I32(a)))) => a.len(),
            Some((_, Value::Array(Array::F32(a)))) => a.len(),
            other => panic!("{key}: {other:?}"),
        };
        for key in [TOKENS, "tokenizer.ggml.token_type", "tokenizer.ggml.scores"] {
            assert_eq!(len(key), n0 + 3, "{key}");
        }
        assert_eq!(v.clone().padded_to(5).n_tokens, n0 + 3);
    }
}
