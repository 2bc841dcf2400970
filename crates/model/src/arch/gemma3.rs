//! Gemma 3 (`general.architecture = gemma3`), after llama.cpp `src/models/gemma3.cpp` and the
//! `LLM_ARCH_GEMMA3` cases of `src/llama-model.cpp`.

use rullama_gguf::Metadata;

use crate::backend::Sequence;
use crate::config::{Activation, ModelConfig, RopeFreqs, RopeStyle, positive_f32};
use crate::error::Result;
use crate::graph::Graph;
use crate::graph::weights::{AttnShape, AttnWeights, Bias, FfnWeights, Linear, Load, blk};

/// Every `SWA_PATTERN`-th layer (il % 6 == 5) is global; the rest use the sliding window.
const SWA_PATTERN: usize = 6;
/// Sliding layers' RoPE (`rope_freq_base_train_swa`), fixed by llama.cpp, not in the file.
const SWA_ROPE: RopeFreqs = RopeFreqs {
    base: 10_000.0,
    freq_scale: 1.0,
};
/// Gemma 3 27B has 62 layers; only there does the attention scale use `d_model / n_head`.
const N_LAYER_27B: usize = 62;

/// The rules llama.cpp applies to gemma3 files.
pub(crate) fn rules(meta: &Metadata, cfg: &mut ModelConfig) -> Result<()> {
    cfg.rope_style = RopeStyle::Neox;
    cfg.activation = Activation::GeluTanh;
    // gemma3.cpp: inpL = ggml_scale(inpL, sqrtf(n_embd)).
    cfg.embed_scale = Some((cfg.d_model as f32).sqrt());
    // f_attention_scale (query_pre_attn_scalar): 1/sqrt(n_embd/n_head) for 27B, else
    // 1/sqrt(head_dim). llama.cpp scales Q by it, then attends with scale 1; we fold it into
    // the attention's scale.
    let scale_dim = if cfg.n_layer == N_LAYER_27B {
        cfg.d_model / cfg.n_head
    } else {
        cfg.head_dim_k
    };
    cfg.attn_scale = 1.0 / (scale_dim as f32).sqrt();
    cfg.final_softcap = positive_f32(meta, "final_logit_softcapping")?;
    // Without a window every layer is global (LLAMA_SWA_TYPE_NONE).
    if let Some(window) = meta
        .arch_opt::<usize>("attention.sliding_window")?
        .filter(|&w| w > 0)
    {
        for (il, layer) in cfg.layers.iter_mut().enumerate() {
            if il % SWA_PATTERN < SWA_PATTERN - 1 {
                layer.window = Some(window);
                layer.rope = SWA_ROPE;
            }
        }
    }
    Ok(())
}

/// One Gemma 3 block. The norm gains in GGUF already include Gemma's `+1`.
#[derive(Debug)]
pub(crate) struct Layer<W> {
    attn_norm: W,
    attn: AttnWeights<W>,
    q_norm: W,
    k_norm: W,
    post_attn_norm: W,
    ffn_norm: W,
    ffn: FfnWeights<W>,
    post_ffw_norm: W,
}

#[derive(Debug)]
pub(crate) struct Weights<W> {
    tok_embd: W,
    layers: Vec<Layer<W>>,
    output_norm: W,
    /// Always tied to `tok_embd`.
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
            qkv_bias: Bias::None,
            o_bias: Bias::None,
        };
        let layers = (0..cfg.n_layer)
            .map(|il| {
                Ok(Layer {
                    attn_norm: l.required(&blk(il, "attn_norm.weight"), &[d])?,
                    attn: AttnWeights::load(l, il, shape)?,
                    q_norm: l.required(&blk(il, "attn_q_norm.weight"), &[cfg.head_dim_k])?,
                    k_norm: l.required(&blk(il, "attn_k_norm.weight"), &[cfg.head_dim_k])?,
                    post_attn_norm: l.required(&blk(il, "post_attention_norm.weight"), &[d])?,
                    ffn_norm: l.required(&blk(il, "ffn_norm.weight"), &[d])?,
                    ffn: FfnWeights::load(l, il, (d, cfg.n_ff), Bias::None)?,
                    post_ffw_norm: l.required(&blk(il, "post_ffw_norm.weight"), &[d])?,
                })
            })
            .collect::<Result<_>>()?;
        Ok(Weights {
            output_norm: l.required("output_norm.weight", &[d])?,
            output: Linear::from_weight(tok_embd.clone()),
            tok_embd,
            layers,
        })
    }
}

pub(crate) fn forward<S: Sequence>(g: &mut Graph<'_, S>, w: &Weights<S::Weight>) -> S::Tensor {
    let hd = g.cfg.head_dim_k;
    let embd = g.input_embeddings(&w.tok_embd);
    let mut inp_l = match g.cfg.embed_scale {
        Some(s) => g.ops.scale(&embd, s),
        None => embd,
    };
    for (il, l) in w.layers.iter().enumerate() {
        let cur = g.norm(&inp_l, &l.attn_norm);

        let q = g.linear(&l.attn.q, &cur);
        let k = g.linear(&l.attn.k, &cur);
        let v = g.linear(&l.attn.v, &cur);
        let q = g.head_norm(&q, &l.q_norm, hd);
        let q = g.rope(&q, il);
        let k = g.head_norm(&k, &l.k_norm, hd);
        let k = g.rope(&k, il);
        let cur = g.attention(il, &q, &k, &v, &l.attn.o);

        let cur = g.norm(&cur, &l.post_attn_norm);
        let sa_out = g.ops.add(&cur, &inp_l);

        let cur = g.norm(&sa_out, &l.ffn_norm);
        let cur = g.ffn(&l.ffn, &cur);
        let cur = g.norm(&cur, &l.post_ffw_norm);
        inp_l = g.ops.add(&cur, &sa_out);
    }
    g.logits(&inp_l, &w.output_norm, &w.output)
}
