//! GGML block formats on the CPU.
//!
//! One module per format, each a `repr(C)` block layout with a size assert plus one
//! [`BlockFormat`] impl; [`ops`] dispatches on a runtime [`Format`] for rows, [`tensor`] for
//! tensors. This is the reference the GPU kernels are checked against, so clarity wins over
//! speed here. [`reference_python`] runs the `gguf` Python package, the reference we are
//! checked against in turn.

mod error;
mod format;
mod num;
pub mod ops;
pub mod reference_python;
pub mod tensor;

pub mod float;
pub mod iq4_nl;
pub mod iq4_xs;
pub mod kquants;
pub mod nf4;
pub mod q1_0_g128;
pub mod q4_0;
pub mod q4_1;
pub mod q5_0;
pub mod q5_1;
pub mod q8_0;
pub mod q8_1;
pub mod widen;

pub use error::QuantError;
pub use format::{BlockFormat, Format};
pub use ops::{
    FormatOps, block_layout, dequantize, dequantize_to_vec, dot, is_supported, quantize,
};
pub use tensor::{dequantize_row, dequantize_tensor, row_bytes};
