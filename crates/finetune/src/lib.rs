//! Fine-tuning a GGUF model with LoRA adapters, on the same graphs and kernels that generate
//! text.
//!
//! The crate will hold LoRA training as a whole: the training tape (the model's forward graph
//! recorded with capture buffers), a backward kernel for every op, AdamW on the GPU, and
//! adapters written for llama.cpp and PEFT. What it holds now is the data side, [`data`]:
//! JSONL datasets read and checked line by line, examples tokenized with the model's own
//! tokenizer and chat template into tokens and a loss mask, sequences cut to the context,
//! shuffled with a seed, split for evaluation, and served as padded or packed batches from a
//! position that a checkpoint can save and restore. `docs/FINETUNE.md` describes it.

#![warn(missing_docs)]

pub mod checkpoint;
pub mod data;
mod error;
pub mod lora;
pub mod loss;
pub mod optim;
pub mod step;
pub mod tape;
pub mod train;

pub use error::{FinetuneError, Result};
