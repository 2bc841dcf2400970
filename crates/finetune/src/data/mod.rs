//! The data side of fine-tuning: from a JSONL file to batches of tokens with a loss mask.
//!
//! 1. [`jsonl`] reads the file, one [`Example`] a line (`{"text"}`, `{"prompt",
//!    "completion"}` as strings or as lists of messages, `{"messages": […]}`); a bad line is a
//!    [`DataError::Line`] naming the file, the line and the field.
//! 2. [`Encoder`] tokenizes an example with the model's tokenizer and chat template into a
//!    [`Sequence`]: tokens and a loss mask over what the model should learn (all of a text,
//!    a completion, the assistant's turns), following TRL's SFT conventions.
//! 3. [`Dataset`] cuts sequences to the context, drops those with nothing left to learn,
//!    reports it all in a [`Summary`], refuses a dataset with no trainable token, and splits
//!    off eval data by seed.
//! 4. [`Batches`] serves padded or packed [`Batch`]es in a seeded order per epoch, from a
//!    [`Position`] that a checkpoint saves and a resumed run restores.
//!
//! ```
//! use std::path::Path;
//! use rullama_finetune::data::{BatchConfig, Batches, Dataset, Encoder, Layout, pad_id};
//! use rullama_gguf::GgufFile;
//! use rullama_synth::{Tiny, tiny_model};
//! use rullama_tokenizer::Tokenizer;
//!
//! let file = GgufFile::from_bytes(tiny_model(Tiny::Qwen2, 7))?;
//! let tokenizer = Tokenizer::from_gguf(file.metadata())?;
//! let jsonl = r#"{"prompt": "2+2=", "completion": "4"}
//! {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}
//! "#;
//! let data = Dataset::read(jsonl.as_bytes(), Path::new("toy.jsonl"), &Encoder::new(&tokenizer), 64)?;
//! let config = BatchConfig {
//!     batch: 2, ctx: 64, layout: Layout::Padded, pad: pad_id(&tokenizer), shuffle: true, seed: 1,
//! };
//! let batch = Batches::new(&data, config)?.next_batch();
//! assert_eq!(batch.rows, 2);
//! assert_eq!(batch.trainable(), data.summary().trainable);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod batch;
mod batches;
mod dataset;
mod encode;
mod error;
mod example;
pub mod jsonl;
mod sequence;
mod shuffle;
mod summary;

pub use batch::{Batch, Span};
pub use batches::{BatchConfig, Batches, Layout, Position, pad_id};
pub use dataset::Dataset;
pub use encode::Encoder;
pub use error::{DataError, LineProblem, Result};
pub use example::{Example, ROLES};
pub use jsonl::Record;
pub use sequence::Sequence;
pub use shuffle::{SplitMix64, permutation, stream_seed};
pub use summary::Summary;
