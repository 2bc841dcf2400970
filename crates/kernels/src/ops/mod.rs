//! The kernels: each file holds an op's parameter struct, its wrapper (which builds [`Op`]
//! values), its CPU reference and its parity test; the WGSL lives under `shaders/`.
//!
//! [`Op`]: crate::Op

pub mod argmax;
pub mod attention;
pub mod attention_coop;
pub mod attention_rope;
pub mod elementwise;
pub mod embed;
pub mod epilogue;
pub mod glu;
pub mod head_norm_rope;
pub mod head_norm_rope_kv;
pub mod kv;
pub mod matmul;
pub mod matmul_coop;
pub mod matvec;
pub mod matvec_q8;
pub mod norm;
pub mod quantize;
pub mod residual_norm;
pub mod residual_norm_q8;
pub mod rope;
pub mod sample;
mod sample_ref;
pub mod split;
pub mod split_k;
pub mod unary;
