//! Llama (`general.architecture = llama`; SmolLM2), after llama.cpp `src/models/llama.cpp`.

use rullama_gguf::Metadata;

use crate::backend::Sequence;
use crate::config::{Activation, ModelConfig, RopeStyle, positive_f32};
use crate::error::{ModelError, Result};
use crate::graph::Graph;
use crate::graph::weights::{AttnShape, AttnWeights, Bias, FfnWeights, Linear, Load, blk};

/// The rules llama.cpp applies to llama files: normal (adjacent-pair) RoPE, which the
/// converter prepared for by permuting the q/k rows; SwiGLU; `kq_scale` from
/// `attention.scale` or `1/sqrt(head_dim)`.
pub(crate) fn rules(meta: &Metadata, cfg: &mut ModelConfig) -> Result<()> {
    cfg.rope_style = RopeStyle::Normal;
    cfg.activation = Activation::Silu;
    if let Some(scale) = positive_f32(meta, "attention.scale")? {
        cfg.attn_scale = scale;
    }
    if meta.arch_opt::<usize>("expert_count")?.unwrap_or(0) > 0 {
        return Err(ModelError::Unsupported("llama mixture of experts".into()));
    }
    Ok(())
}

#[derive(Debug)]
pub(crate) struct Layer<W> {
    attn_norm: W,
    attn: AttnWeights<W>,
    ffn_norm: W,
    ffn: FfnWeights<W>,
}

#[derive(Debug)]
pub(crate) struct Weights<W> {
    tok_embd: W,
    layers: Vec<Layer<W>>,
    output_norm: W,
    /// `output.weight`, or `tok_embd` when the file ties them.
    output: Linear<W>,
}

/// Which biases a pre-norm block's linears carry: the one difference between the Llama and
/// Qwen 2 blocks.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BlockBiases {
    pub qkv: Bias,
    pub ffn: Bias,
}

impl<W: Clone> Weights<W> {
    pub fn load<L: Load<W = W>>(cfg: &ModelConfig, l: &mut L) -> Result<Self> {
        if l.optional("rope_freqs.weight", &[cfg.n_rot / 2])?.is_some() {
            return Err(ModelError::Unsupported(
                "rope_freqs (Llama 3 RoPE factors)".into(),
            ));
        }
        let biases = BlockBiases {
            qkv: Bias::Optional,
            ffn: Bias::Optional,
        };
        Self::load_block(cfg, l, biases)
    }

    /// The weights of a pre-norm Llama-style model whose linears carry `biases`.
    pub fn load_block<L: Load<W = W>>(
        cfg: &ModelConfig,
        l: &mut L,
        biases: BlockBiases,
    ) -> Result<Self> {
        let d = cfg.d_model;
        let tok_embd = l.required("token_embd.weight", &[d, cfg.n_vocab])?;
        let shape = AttnShape {
            d_model: d,
            q_out: cfg.n_head * cfg.head_dim_k,
            k_out: cfg.n_head_kv * cfg.head_dim_k,
            v_out: cfg.n_head_kv * cfg.head_dim_v,
            qkv_bias: biases.qkv,
            o_bias: Bias::Optional,
        };
        let layers = (0..cfg.n_layer)
            .map(|il| {
                Ok(Layer {
                    attn_norm: l.required(&blk(il, "attn_norm.weight"), &[d])?,
                    attn: AttnWeights::load(l, il, shape)?,
                    ffn_norm: l.required(&blk(il, "ffn_norm.weight"), &[d])?,
                    ffn: FfnWeights::load(l, il, (d, cfg.n_ff), biases.ffn)?,
                })
            })
            .collect::<Result<_>>()?;
        let output = l.optional("output.weight", &[d, cfg.n_vocab])?;
        Ok(Weights {
            output_norm: l.required("output_norm.weight", &[d])?,
            output: Linear::from_weight(output.unwrap_or_else(|| tok_embd.clone())),
            tok_embd,
            layers,
        })
    }
}

/// The pre-norm block (llama.cpp `src/models/llama.cpp`, and `qwen2.cpp`, which differs only
/// in its biases): `norm → q, k, v → rope → attention + o → add → norm → ffn → add`.
pub(crate) fn forward<S: Sequence>(g: &mut Graph<'_, S>, w: &Weights<S::Weight>) -> S::Tensor {
    let mut inp_l = g.input_embeddings(&w.tok_embd);
    for (il, l) in w.layers.iter().enumerate() {
        let inp_sa = inp_l;
        let cur = g.norm(&inp_sa, &l.attn_norm);

        let q = g.linear(&l.attn.q, &cur);
        let k = g.linear(&l.attn.k, &cur);
        let v = g.linear(&l.attn.v, &cur);
        let q = g.rope(&q, il);
        let k = g.rope(&k, il);
        let cur = g.attention(il, &q, &k, &v, &l.attn.o);
        let ffn_inp = g.ops.add(&cur, &inp_sa);

        let cur = g.norm(&ffn_inp, &l.ffn_norm);
        let cur = g.ffn(&l.ffn, &cur);
        inp_l = g.ops.add(&cur, &ffn_inp);
    }
    g.logits(&inp_l, &w.output_norm, &w.output)
}
