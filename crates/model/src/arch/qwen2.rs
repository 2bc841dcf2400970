//! Qwen 2 / 2.5 (`general.architecture = qwen2`), after llama.cpp `src/models/qwen2.cpp`: the
//! Llama graph (`llama::forward`) with q/k/v biases and NeoX RoPE.

use rullama_gguf::Metadata;

use super::llama::{self, BlockBiases};
use crate::config::{Activation, ModelConfig, RopeStyle};
use crate::error::Result;
use crate::graph::weights::{Bias, Load};

/// The rules llama.cpp applies to qwen2 files: NeoX RoPE, SwiGLU, `1/sqrt(head_dim)`.
pub(crate) fn rules(_meta: &Metadata, cfg: &mut ModelConfig) -> Result<()> {
    cfg.rope_style = RopeStyle::Neox;
    cfg.activation = Activation::Silu;
    cfg.attn_scale = 1.0 / (cfg.head_dim_k as f32).sqrt();
    Ok(())
}

/// Qwen 2's weights: the Llama block with biases on q, k and v (required) and none on the FFN.
pub(crate) fn load_weights<W: Clone, L: Load<W = W>>(
    cfg: &ModelConfig,
    l: &mut L,
) -> Result<llama::Weights<W>> {
    let biases = BlockBiases {
        qkv: Bias::Required,
        ffn: Bias::None,
    };
    llama::Weights::load_block(cfg, l, biases)
}
