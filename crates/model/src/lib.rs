//! Models from GGUF files, written once over a small op set.
//!
//! - [`ModelConfig`]: hyper-parameters from GGUF metadata plus the per-architecture rules
//!   llama.cpp applies that the file does not store.
//! - [`Backend`]: an executor's device side (weights, and on the GPU pipelines and built
//!   plans), shared by every sequence; [`Sequence`]: one sequence's state (KV cache, queued
//!   draws) and the op set (embed, matmul, add_bias, rms_norm, rope, attention, glu, add,
//!   scale, softcap, rows) its steps record. The graph only calls ops on handles, so an
//!   executor can run them at once ([`CpuBackend`], the f32 reference) or record them
//!   ([`GpuBackend`]).
//! - `arch/*.rs`: one file per architecture (rules, weights, graph), over the shared builders
//!   of `graph/`.
//! - [`Model`] / [`Session`]: load once, then any number of sessions (sequences) run blocks
//!   of tokens (prefill) or single tokens (decode) through the same graph, each over its own
//!   KV cache.
//!
//! - [`Generator`] draws tokens with a [`Sampler`](sampler::Sampler), keeping the device
//!   busy; [`perplexity`]: llama-perplexity's method over a [`Model`].
//! - [`validate`]: the range check of the values a user sets (sampling, context), shared by
//!   every front end; the KV cache's size against the machine is checked when a session is
//!   made ([`ModelError::ContextTooLarge`]).
//!
//! ```rust
//! use rullama_gguf::GgufFile;
//! use rullama_model::{CpuBackend, Model};
//! use rullama_synth::{Tiny, tiny_model};
//!
//! // A tiny model with random weights, made in memory (`Model::open(path, ..)` loads a file).
//! let file = GgufFile::from_bytes(tiny_model(Tiny::Gemma3, 7))?;
//! let model = Model::load(&file, CpuBackend::new())?;
//! let mut session = model.session(64)?;
//! let prompt = [2, 40, 41, 42]; // token ids: rullama-tokenizer makes them from text
//! let continuation = session.greedy(&prompt, 4)?;
//! assert_eq!(continuation.len(), 4);
//! // The cache holds the prompt and every token fed back (all but the last drawn).
//! assert_eq!(session.len(), prompt.len() + 3);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! `examples/generate.rs` streams a completion of a text prompt, with the tokenizer, a
//! sampler and the GPU executor at `--gpu`
//! (`cargo run --release -p rullama-model --example generate -- model.gguf "Once upon a time"`).
//! See `docs/MODEL.md` for the graphs and executors.

#![warn(missing_docs)]

mod arch;
pub mod backend;
mod chunk;
mod config;
mod context;
pub mod cpu;
mod error;
mod flops;
mod generate;
pub mod gpu;
mod graph;
pub mod logits;
pub mod lora;
mod memory;
mod model;
pub mod perplexity;
pub mod sampler;
pub mod validate;

pub use arch::Arch;
pub use backend::{Backend, PendingToken, QueueDepth, Sequence};
pub use chunk::DEFAULT_UBATCH;
pub use config::{Activation, LayerConfig, ModelConfig, RopeFreqs, RopeStyle};
pub use context::MemoryLimit;
pub use cpu::CpuBackend;
pub use error::{MISSING_LISTED, ModelError, Result};
pub use generate::{Generator, HostTimes, StopReason};
pub use gpu::GpuBackend;
pub use graph::OutputRows;
pub use lora::{LoraAdapter, LoraError};
pub use memory::DeviceMemory;
pub use model::{Logits, Model, Session, StepInput};
pub use rullama_kernels::{KernelTime, StepProfile};
