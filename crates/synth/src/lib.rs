//! Synthetic GGUF models: the shapes of a real model (or a tiny one), random weights of real
//! magnitudes in llama-quantize's mix, and a tokenizer (a real file's, or a synthetic one of
//! the family's kind).
//!
//! Two uses: speed tests on models we cannot download (`cargo xtask synth`, a thin command
//! line over this crate), and behavioural tests that need a model but no real model's
//! weights: [`tiny_model`] builds one of every architecture in memory, a few MB, from a seed.
//!
//! ```
//! use rullama_synth::{Tiny, tiny_model};
//! let bytes = tiny_model(Tiny::Qwen2, 7);
//! let file = rullama_gguf::GgufFile::from_bytes(bytes)?;
//! assert_eq!(file.metadata().architecture()?, "qwen2");
//! # Ok::<(), rullama_gguf::GgufError>(())
//! ```

#![warn(missing_docs)]

mod error;
pub mod lora;
mod mix;
mod plan;
mod shapes;
mod tiny;
mod tokenizer;
mod vocab;
mod weights;
mod write;

pub use error::{Result, SynthError};
pub use mix::Mix;
pub use plan::{Plan, Role, TensorPlan};
pub use shapes::{Family, Preset, Shape};
pub use tiny::{Tiny, tiny_model, tiny_model_with};
pub use tokenizer::{N_TOKENS, TokenizerStyle};
pub use vocab::{Vocab, write_vocab_only};
pub use write::{Summary, Synth};
