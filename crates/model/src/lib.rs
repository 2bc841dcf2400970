//! Models from GGUF files, written once over a small op set.
//!
//! - [`ModelConfig`]: hyper-parameters from GGUF metadata plus the per-architecture rules
//!   llama.cpp applies that the file does not store.
//! - [`Backend`]: the op set (embed, matmul, add_bias, rms_norm, rope, attention, glu, add,
//!   scale, softcap, rows). The graph only calls ops on handles, so a backend can execute
//!   them at once ([`CpuBackend`], the f32 reference) or record them (the GPU).
//! - `arch/*.rs`: one file per architecture (rules, weights, graph), over the shared builders
//!   of `graph/`.
//! - [`Model`] / [`Session`]: load, then run blocks of tokens (prefill) or single tokens
//!   (decode) through the same graph with a [`KvCache`].
//!
//! - [`perplexity`]: llama-perplexity's method over a [`Model`], for the CLI and xtask.
//!
//! See `docs/MODEL.md`.

mod arch;
pub mod backend;
mod config;
pub mod cpu;
mod error;
mod generate;
pub mod gpu;
mod graph;
pub mod logits;
mod model;
pub mod perplexity;
pub mod sampler;

pub use arch::Arch;
pub use backend::{Backend, PendingToken};
pub use config::{Activation, LayerConfig, ModelConfig, RopeFreqs, RopeStyle};
pub use cpu::CpuBackend;
pub use error::{ModelError, Result};
pub use generate::{Generator, HostTimes};
pub use gpu::{DeviceMemory, GpuBackend, KernelTime, StepProfile};
pub use graph::OutputRows;
pub use model::{Input, KvCache, Logits, Model, Session};
