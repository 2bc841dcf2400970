//! The shared builders the architecture files are written with (llama.cpp's
//! `llm_graph_context`: `build_norm`, `build_lora_mm`, `build_attn`, `build_ffn`).
//!
//! A [`Graph`] is one step: a block of `n_tokens` tokens at consecutive positions, prefill
//! and decode alike. Builders only call [`Backend`] ops on handles.

pub(crate) mod weights;

use crate::backend::{Attention, AttentionInputs, Backend, RmsNorm, Rope};
use crate::config::ModelConfig;
use weights::{FfnWeights, Linear};

/// Which rows the LM head runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OutputRows {
    /// Only the last token's (generation).
    #[default]
    Last,
    /// Every token's (scoring, perplexity).
    All,
}

/// One step of the graph: the backend, the config, the cache and the step's inputs.
pub(crate) struct Graph<'a, B: Backend> {
    pub b: &'a mut B,
    pub cfg: &'a ModelConfig,
    pub cache: &'a mut B::KvCache,
    pub tokens: &'a B::Ids,
    pub positions: &'a B::Ids,
    pub n_tokens: usize,
    pub output: OutputRows,
}

type T<B> = <B as Backend>::Tensor;
type W<B> = <B as Backend>::Weight;

impl<B: Backend> Graph<'_, B> {
    /// The step's token embeddings, `[n, d_model]`.
    pub fn input_embeddings(&mut self, table: &W<B>) -> T<B> {
        self.b.embed(table, self.tokens)
    }

    /// RMS norm over whole rows with the model's epsilon.
    pub fn norm(&mut self, x: &T<B>, weight: &W<B>) -> T<B> {
        let p = RmsNorm {
            weight: Some(weight),
            eps: self.cfg.rms_eps,
            group: self.cfg.d_model,
        };
        self.b.rms_norm(x, &p)
    }

    /// RMS norm of each head of `head_dim` values (Gemma's and Qwen 3's q/k norms).
    pub fn head_norm(&mut self, x: &T<B>, weight: &W<B>, head_dim: usize) -> T<B> {
        let p = RmsNorm {
            weight: Some(weight),
            eps: self.cfg.rms_eps,
            group: head_dim,
        };
        self.b.rms_norm(x, &p)
    }

    /// `x · Wᵀ (+ bias)`: every projection goes through here (LoRA's hook).
    pub fn linear(&mut self, l: &Linear<W<B>>, x: &T<B>) -> T<B> {
        let y = self.b.matmul(&l.weight, x);
        match &l.bias {
            Some(bias) => self.b.add_bias(&y, bias),
            None => y,
        }
    }

    /// RoPE with layer `il`'s frequencies.
    pub fn rope(&mut self, x: &T<B>, il: usize) -> T<B> {
        let cfg = self.cfg;
        let freqs = cfg.layers[il].rope;
        let p = Rope {
            head_dim: cfg.head_dim_k,
            n_rot: cfg.n_rot,
            base: freqs.base,
            freq_scale: freqs.freq_scale,
            style: cfg.rope_style,
        };
        self.b.rope(x, self.positions, &p)
    }

    /// Attention of layer `il` over the cache, then the output projection (`build_attn`).
    pub fn attention(
        &mut self,
        il: usize,
        q: &T<B>,
        k: &T<B>,
        v: &T<B>,
        wo: &Linear<W<B>>,
    ) -> T<B> {
        let cfg = self.cfg;
        let p = Attention {
            layer: il,
            n_head: cfg.n_head,
            n_head_kv: cfg.n_head_kv,
            head_dim_k: cfg.head_dim_k,
            head_dim_v: cfg.head_dim_v,
            scale: cfg.attn_scale,
            window: cfg.layers[il].window,
            softcap: cfg.attn_softcap,
        };
        let inputs = AttentionInputs {
            q,
            k,
            v,
            positions: self.positions,
        };
        let kqv = self.b.attention(self.cache, inputs, &p);
        self.linear(wo, &kqv)
    }

    /// Gated FFN: `down(act(gate(x)) * up(x))` (`build_ffn` with `LLM_FFN_PAR`).
    pub fn ffn(&mut self, f: &FfnWeights<W<B>>, x: &T<B>) -> T<B> {
        let gate = self.linear(&f.gate, x);
        let up = self.linear(&f.up, x);
        let act = self.b.glu(&gate, &up, self.cfg.activation);
        self.linear(&f.down, &act)
    }

    /// The rows the LM head runs on, the final norm, the LM head and the logit soft-cap.
    pub fn logits(&mut self, x: &T<B>, output_norm: &W<B>, output: &Linear<W<B>>) -> T<B> {
        let rows = match self.output {
            OutputRows::Last if self.n_tokens > 1 => {
                Some(self.b.rows(x, self.n_tokens - 1..self.n_tokens))
            }
            _ => None,
        };
        let cur = self.norm(rows.as_ref().unwrap_or(x), output_norm);
        let logits = self.linear(output, &cur);
        match self.cfg.final_softcap {
            Some(cap) => self.b.softcap(&logits, cap),
            None => logits,
        }
    }
}
