//! One error type for building a tokenizer, decoding ids and rendering chat templates.
//!
//! Encoding itself cannot fail: every `&str` has a tokenization. What can fail is reading the
//! vocabulary (missing or malformed metadata, a tokenizer type we do not implement), looking
//! up an id that is not in the vocabulary, and rendering a template.

use rullama_gguf::GgufError;

/// This crate's results: a [`TokenizerError`] unless said otherwise.
pub type Result<T, E = TokenizerError> = std::result::Result<T, E>;

/// Everything that can go wrong building a tokenizer, decoding ids or rendering a template.
#[derive(Debug, thiserror::Error)]
pub enum TokenizerError {
    /// A metadata key was missing or had the wrong type.
    #[error("tokenizer metadata: {0}")]
    Metadata(#[from] GgufError),

    /// `tokenizer.ggml.model` names a tokenizer this crate does not implement.
    #[error("tokenizer model `{0}` is not supported (supported: llama (SPM), gpt2 (BPE))")]
    UnsupportedModel(String),

    /// `tokenizer.ggml.pre` names a BPE pre-tokenizer this crate does not implement.
    #[error("BPE pre-tokenizer `{0}` is not supported")]
    UnsupportedPreTokenizer(String),

    /// The vocabulary is inconsistent: duplicate tokens, arrays of different lengths, ...
    #[error("invalid vocabulary: {0}")]
    InvalidVocab(String),

    /// An id passed in is outside the vocabulary.
    #[error("token id {id} is out of range (vocabulary has {n_vocab} tokens)")]
    TokenOutOfRange {
        /// The id.
        id: u32,
        /// Tokens in the vocabulary.
        n_vocab: usize,
    },

    /// The model has no chat template and no built-in format is known for it.
    #[error("no chat template in the file and no built-in format for architecture `{0}`")]
    NoChatTemplate(String),

    /// A chat template failed to parse or render.
    #[error("chat template ({source_name}){}: {message}", line.map(|l| format!(" line {l}")).unwrap_or_default())]
    Template {
        /// Where the template came from: `tokenizer.chat_template` or `built-in <name>`.
        source_name: String,
        /// The template line minijinja points at, if it does.
        line: Option<usize>,
        /// minijinja's message.
        message: String,
    },
}
