//! GGML block formats on the CPU.
//!
//! One module per format, each a `repr(C)`-sized block layout plus one [`BlockFormat`] impl;
//! [`ops`] dispatches on a runtime [`Format`] for whole rows and tensors. This is the reference
//! the GPU kernels are checked against, so clarity wins over speed here.

mod format;

pub use format::{BlockFormat, Format};
