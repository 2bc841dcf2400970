//! Tokenizers built from GGUF metadata alone, producing the ids llama.cpp produces, and chat
//! templates.
//!
//! * SPM (`tokenizer.ggml.model = llama`, e.g. Gemma): score-driven merges over the text with
//!   spaces spelled U+2581, `<0xXX>` byte tokens for the rest.
//! * BPE (`gpt2`, e.g. SmolLM2, Qwen2.5): a pre-tokenizer per `tokenizer.ggml.pre`
//!   (`default`, `gpt2`, `llama3`, `qwen2`, `smollm`/`starcoder` families), GPT-2's byte
//!   characters, rank-driven merges.
//!
//! Both first cut the text at special tokens the way llama.cpp does, and both run in
//! O(n log n) on any input. [`StreamDecoder`] turns ids back into text as they are generated;
//! [`ChatTemplate`] renders a conversation into a prompt. docs/TOKENIZER.md has the details.
//!
//! ```rust
//! use rullama_gguf::GgufFile;
//! use rullama_synth::{Tiny, tiny_model};
//! use rullama_tokenizer::{EncodeOptions, Tokenizer};
//!
//! // A tiny model's file, made in memory (`Tokenizer::open(path)` reads a file's).
//! let file = GgufFile::from_bytes(tiny_model(Tiny::Qwen2, 7))?;
//! let tok = Tokenizer::from_gguf(file.metadata())?;
//! let options = EncodeOptions { add_special: true, parse_special: false };
//! let ids = tok.encode("Hello world", options);
//! assert_eq!(tok.decode(&ids)?, "Hello world");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![warn(missing_docs)]

mod bpe;
mod byte_level;
pub mod chat;
mod config;
mod decode;
mod error;
mod merge;
mod partition;
mod pretokenize;
mod special;
mod spm;
mod stream;
#[cfg(test)]
mod tests;
mod tokenizer;
mod unicode;
mod vocab;

pub use chat::{ChatMessage, ChatPrompt, ChatTemplate, Segment};
pub use config::TokenizerKind;
pub use error::{Result, TokenizerError};
pub use special::SpecialTokens;
pub use stream::StreamDecoder;
pub use tokenizer::{EncodeOptions, Tokenizer};
pub use vocab::TokenAttr;
