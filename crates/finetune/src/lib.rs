//! Fine-tuning a GGUF model with LoRA adapters, on the same graphs that generate text.
//!
//! - [`data`]: JSONL datasets read and checked line by line, examples tokenized with the
//!   model's own tokenizer and chat template into tokens and a loss mask, cut to the context,
//!   shuffled with a seed, split for evaluation, served as padded or packed batches from a
//!   position that a checkpoint saves.
//! - [`engine`]: the seam a trainer runs over, implemented twice: [`gpu`], the GPU engine
//!   (the model's graph recorded and lowered into built steps of kernels: forward, a chunked
//!   loss head, backward and AdamW on the device), and [`tape`], the training tape, an executor
//!   of `rullama-model` that records the graph in f64 with every op's output and walks it
//!   backward (the reference); [`lora`]: the adapter being trained (PEFT's parameters and
//!   initialisation); [`loss`]: the masked next-token cross-entropy; [`step`]: one sequence
//!   forward and back on the tape.
//! - [`optim`]: AdamW with global-norm clipping and transformers' schedules; [`train`]: the
//!   [`train::Trainer`] that takes optimizer steps over batches; [`checkpoint`]: the state a
//!   run resumes from, bit for bit.
//!
//! `docs/FINETUNE.md` describes it, with a tutorial; `rullama finetune` drives it.

#![warn(missing_docs)]

pub mod checkpoint;
pub mod data;
pub mod engine;
mod error;
pub mod gpu;
pub mod lora;
pub mod loss;
pub mod memory;
pub mod optim;
pub mod step;
pub mod tape;
pub mod train;

pub use error::{FinetuneError, Fit, Result};
