//! The shared builders the architecture files are written with (llama.cpp's
//! `llm_graph_context`: `build_norm`, `build_lora_mm`, `build_attn`, `build_ffn`).
//!
//! A [`Graph`] is one step: a block of `n_tokens` tokens at consecutive positions, prefill
//! and decode alike, recorded over one sequence. Builders only call [`Sequence`] ops on
//! handles.

pub(crate) mod weights;

use crate::backend::{AttentionInputs, AttentionParams, RmsNormParams, RopeParams, Sequence};
use crate::config::ModelConfig;
use crate::lora::attach::LoraWeights;
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

/// What a step ends with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StepEnd {
    /// The logits of these rows.
    Logits(OutputRows),
    /// Nothing the caller reads: the step fills the cache (a long prompt's leading chunks,
    /// `chunk.rs`). It ends at the last row's final norm, without the LM head (a
    /// vocabulary-wide product nobody would read).
    Cache,
}

/// One step of the graph: the sequence it records over (its ops, its KV cache), the config
/// and the step's inputs.
pub(crate) struct Graph<'a, S: Sequence> {
    pub ops: &'a mut S,
    pub cfg: &'a ModelConfig,
    pub tokens: &'a S::Ids,
    pub positions: &'a S::Ids,
    pub n_tokens: usize,
    pub end: StepEnd,
    /// The LoRA adapters' updates, by projection (empty without adapters).
    pub lora: &'a LoraWeights<W<S>>,
}

type T<S> = <S as Sequence>::Tensor;
type W<S> = <S as Sequence>::Weight;

impl<S: Sequence> Graph<'_, S> {
    /// The step's token embeddings, `[n, d_model]`.
    pub fn input_embeddings(&mut self, table: &W<S>) -> T<S> {
        self.ops.embed(table, self.tokens)
    }

    /// RMS norm over whole rows with the model's epsilon.
    pub fn norm(&mut self, x: &T<S>, weight: &W<S>) -> T<S> {
        let p = RmsNormParams {
            weight: Some(weight),
            eps: self.cfg.rms_eps,
            group: self.cfg.d_model,
        };
        self.ops.rms_norm(x, &p)
    }

    /// RMS norm of each head of `head_dim` values (Gemma's and Qwen 3's q/k norms).
    pub fn head_norm(&mut self, x: &T<S>, weight: &W<S>, head_dim: usize) -> T<S> {
        let p = RmsNormParams {
            weight: Some(weight),
            eps: self.cfg.rms_eps,
            group: head_dim,
        };
        self.ops.rms_norm(x, &p)
    }

    /// `x · Wᵀ (+ bias)`: every projection goes through here. With LoRA adapters that
    /// update `W`, `+ (x · Aᵀ) · Bᵀ` as well (llama.cpp's `build_lora_mm`: two thin
    /// products and an add; the adapters' factors are folded into `B`, `lora/attach.rs`).
    /// Without one the graph is the plain product's.
    pub fn linear(&mut self, l: &Linear<W<S>>, x: &T<S>) -> T<S> {
        let y = self.ops.matmul(&l.weight, x);
        let y = match &l.bias {
            Some(bias) => self.ops.add_bias(&y, bias),
            None => y,
        };
        match l.name.as_deref().and_then(|n| self.lora.get(n)) {
            Some(lora) => {
                let ax = self.ops.matmul(&lora.a, x);
                let bax = self.ops.matmul(&lora.b, &ax);
                self.ops.add(&y, &bax)
            }
            None => y,
        }
    }

    /// RoPE with layer `il`'s frequencies.
    pub fn rope(&mut self, x: &T<S>, il: usize) -> T<S> {
        let cfg = self.cfg;
        let freqs = cfg.layers[il].rope;
        let p = RopeParams {
            head_dim: cfg.head_dim_k,
            n_rot: cfg.n_rot,
            base: freqs.base,
            freq_scale: freqs.freq_scale,
            style: cfg.rope_style,
        };
        self.ops.rope(x, self.positions, &p)
    }

    /// Attention of layer `il` over the cache, then the output projection (`build_attn`).
    pub fn attention(
        &mut self,
        il: usize,
        q: &T<S>,
        k: &T<S>,
        v: &T<S>,
        wo: &Linear<W<S>>,
    ) -> T<S> {
        let cfg = self.cfg;
        let p = AttentionParams {
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
        let kqv = self.ops.attention(inputs, &p);
        self.linear(wo, &kqv)
    }

    /// Gated FFN: `down(act(gate(x)) * up(x))` (`build_ffn` with `LLM_FFN_PAR`).
    pub fn ffn(&mut self, f: &FfnWeights<W<S>>, x: &T<S>) -> T<S> {
        let gate = self.linear(&f.gate, x);
        let up = self.linear(&f.up, x);
        let act = self.ops.glu(&gate, &up, self.cfg.activation);
        self.linear(&f.down, &act)
    }

    /// The rows the LM head runs on, the final norm, the LM head and the logit soft-cap
    /// (a [`StepEnd::Cache`] step: the last row's final norm).
    pub fn logits(&mut self, x: &T<S>, output_norm: &W<S>, output: &Linear<W<S>>) -> T<S> {
        let rows = match self.end {
            StepEnd::Logits(OutputRows::All) => None,
            _ if self.n_tokens > 1 => Some(self.ops.rows(x, self.n_tokens - 1..self.n_tokens)),
            _ => None,
        };
        let cur = self.norm(rows.as_ref().unwrap_or(x), output_norm);
        if self.end == StepEnd::Cache {
            return cur;
        }
        let logits = self.linear(output, &cur);
        match self.cfg.final_softcap {
            Some(cap) => self.ops.softcap(&logits, cap),
            None => logits,
        }
    }
}
