//! The kernels: each module holds an op's parameter struct, its wrapper (which builds [`Op`]
//! values) and its kernel family ([`crate::KernelFamily`]: its programs and override
//! constants); its `parity` submodule (the `parity` feature, and the crate's own tests) holds
//! its CPU reference, its parity checks and its tests. The WGSL lives under `shaders/`.
//!
//! [`Op`]: crate::Op

pub mod adamw;
pub mod argmax;
pub mod attention;
pub mod attention_backward;
pub mod attention_coop;
pub mod attention_rope;
pub mod attention_train;
pub mod attention_train_coop;
pub mod cross_entropy;
pub mod dropout;
pub mod elementwise;
pub mod embed;
pub mod epilogue;
pub mod f16_copy;
pub mod f16_copy_x;
pub mod glu;
pub mod glu_backward;
pub mod head_norm_rope;
pub mod head_norm_rope_kv;
pub mod kv;
pub mod matmul;
pub mod matmul_coop;
pub mod matmul_dense;
pub mod matmul_input_grad;
pub mod matmul_small_m;
pub mod matmul_thin;
pub mod matmul_weight_grad;
pub mod matvec;
pub mod norm;
pub mod quantize;
pub mod residual_norm;
pub mod residual_norm_q8;
pub mod rms_norm_backward;
pub mod rope;
pub mod rope_backward;
pub mod sample;
mod sample_ref;
pub mod split;
pub mod split_k;
pub mod split_sum;
pub mod unary;
