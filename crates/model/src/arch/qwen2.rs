//! Qwen 2 / 2.5 (`general.architecture = qwen2`), after llama.cpp `src/models/qwen2.cpp`.

use rullama_gguf::Metadata;

use crate::backend::Backend;
use crate::config::{Activation, ModelConfig, RopeStyle};
use crate::error::Result;
use crate::graph::Graph;
use crate::graph::weights::{AttnShape, AttnWeights, Bias, FfnWeights, Linear, Load, blk};

/// The rules llama.cpp applies to qwen2 files: NeoX RoPE, SwiGLU, `1/sqrt(head_dim)`.
pub(crate) fn rules(_meta: &Metadata, cfg: &mut ModelConfig) -> Result<()> {
    cfg.rope_style = RopeStyle::Neox;
    cfg.activation = Activation::Silu;
    cfg.attn_scale = 1.0 / (cfg.head_dim_k as f32).sqrt();
    Ok(())
}

#[derive(Debug)]
pub(crate) struct Layer<W> {
    attn_norm: W,
    /// q, k and v carry biases; the output projection does not.
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

impl<W: Clone> Weights<W> {
    pub fn load<L: Load<W = W>>(cfg: &ModelConfig, l: &mut L) -> Result<Self> {
        let d = cfg.d_model;
        let tok_embd = l.required("token_embd.weight", &[d, cfg.n_vocab])?;
        let shape = AttnShape {
            d_model: d,
            q_out: cfg.n_head * cfg.head_dim_k,
            k_out: cfg.n_head_kv * cfg.head_dim_k,
            v_out: cfg.n_head_kv * cfg.head_dim_v,
            qkv_bias: Bias::Required,
            o_bias: Bias::Optional,
        };
        let layers = (0..cfg.n_layer)
            .map(|il| {
                Ok(Layer {
                    attn_norm: l.required(&blk(il, "attn_norm.weight"), &[d])?,
                    attn: AttnWeights::load(l, il, shape)?,
                    ffn_norm: l.required(&blk(il, "ffn_norm.weight"), &[d])?,
                    ffn: FfnWeights::load(l, il, (d, cfg.n_ff), Bias::None)?,
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

pub(crate) fn forward<B: Backend>(g: &mut Graph<'_, B>, w: &Weights<B::Weight>) -> B::Tensor {
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
        let ffn_inp = g.b.add(&cur, &inp_sa);

        let cur = g.norm(&ffn_inp, &l.ffn_norm);
        let cur = g.ffn(&l.ffn, &cur);
        inp_l = g.b.add(&cur, &ffn_inp);
    }
    g.logits(&inp_l, &w.output_norm, &w.output)
}
