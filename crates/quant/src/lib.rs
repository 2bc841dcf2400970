//! GGML block formats on the CPU.
//!
//! One module per format, each a `repr(C)` block layout with a size assert plus one
//! [`BlockFormat`] impl; [`ops`] dispatches on a runtime [`Format`] for rows, [`tensor`] for
//! tensors. This is the reference the GPU kernels are checked against, so clarity wins over
//! speed here. [`reference_python`] runs the `gguf` Python package, the reference we are
//! checked against in turn.
//!
//! ```rust
//! use rullama_gguf::GgmlType;
//! use rullama_quant::{Format, dequantize_to_vec, dot, quantize};
//!
//! // One row of 64 weights in Q8_0: two blocks of 32, each an f16 scale and 32 int8s.
//! let row: Vec<f32> = (0..64).map(|i| (i as f32 - 32.0) / 8.0).collect();
//! let q8_0 = Format::Ggml(GgmlType::Q8_0);
//! let bytes = quantize(q8_0, &row)?;
//! assert_eq!(bytes.len(), 2 * 34);
//! let back = dequantize_to_vec(q8_0, &bytes)?;
//! assert!(row.iter().zip(&back).all(|(a, b)| (a - b).abs() <= 4.0 / 127.0));
//! // A dot product straight from the blocks, as a matmul row reads them.
//! let ones = vec![1.0; 64];
//! let sum: f32 = back.iter().sum();
//! assert!((dot(q8_0, &bytes, &ones)? - sum).abs() < 1e-3);
//! # Ok::<(), rullama_quant::QuantError>(())
//! ```

#![warn(missing_docs)]

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
pub mod mix;
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
