//! The tensors and hyper-parameter keys of a synthetic model: names, shapes and roles as
//! llama.cpp's loader (`src/llama-model.cpp`) and ours (`crates/model/src/arch/*.rs`) expect
//! them for each family, and the distribution each tensor's values are drawn from.

use rullama_gguf::Value;

use crate::shapes::{Family, Shape};
use crate::weights::Dist;

/// What a tensor is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// `token_embd.weight`: the embedding table (also the LM head when tied).
    TokenEmbd,
    /// `output.weight`: the LM head of an untied model.
    Output,
    /// `attn_q.weight`.
    AttnQ,
    /// `attn_k.weight`.
    AttnK,
    /// `attn_v.weight` (more bits in some layers of Q4_K_M).
    AttnV,
    /// `attn_output.weight`.
    AttnOutput,
    /// `ffn_gate.weight`.
    FfnGate,
    /// `ffn_up.weight`.
    FfnUp,
    /// `ffn_down.weight` (more bits in some layers of Q4_K_M).
    FfnDown,
    /// A 1-D norm gain.
    Norm,
    /// A 1-D bias (Qwen 2's q/k/v).
    Bias,
}

/// One tensor to write.
#[derive(Debug, Clone, PartialEq)]
pub struct TensorPlan {
    /// Its GGUF name.
    pub name: String,
    /// GGML order: `dims[0]` is the row length (the input size of a matrix).
    pub dims: Vec<u64>,
    /// What it is (which draws its values; the quant mix goes by its name).
    pub role: Role,
    /// The block it belongs to (0 for the tensors outside the blocks).
    pub layer: usize,
}

impl TensorPlan {
    /// The product of its dims.
    pub fn n_elements(&self) -> u64 {
        self.dims.iter().product()
    }

    /// Matrices `N(0, 1/n_in)`-like, so a normed input keeps unit scale through each linear
    /// (and Gemma's `sqrt(d_model)`-scaled embeddings have unit scale); norm gains near 1
    /// (the GGUF stores Gemma's `1 + w` already); biases small.
    pub(crate) fn dist(&self) -> Dist {
        match self.role {
            Role::Norm => Dist {
                center: 1.0,
                sigma: 0.05,
            },
            Role::Bias => Dist {
                center: 0.0,
                sigma: 0.02,
            },
            _ => Dist {
                center: 0.0,
                sigma: 1.0 / (self.dims[0] as f32).sqrt(),
            },
        }
    }
}

/// A synthetic model: its shape, its vocabulary size and its tensors in file order.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The hyper-parameters.
    pub shape: Shape,
    /// Tokens in the vocabulary it is planned for (the tokenizer's, not the shape's).
    pub n_vocab: usize,
    /// The tensors, in the order they are written.
    pub tensors: Vec<TensorPlan>,
}

impl Plan {
    /// The tensors of a `shape` model with a vocabulary of `n_vocab`.
    pub fn new(shape: Shape, n_vocab: usize) -> Plan {
        let s = shape;
        let (d, v) = (s.d_model as u64, n_vocab as u64);
        let (q_out, kv_out) = (
            (s.n_head * s.head_dim) as u64,
            (s.n_head_kv * s.head_dim) as u64,
        );
        let (ff, hd) = (s.n_ff as u64, s.head_dim as u64);
        let mut tensors = Vec::new();
        let mut add = |layer: usize, name: String, dims: Vec<u64>, role: Role| {
            tensors.push(TensorPlan {
                name,
                dims,
                role,
                layer,
            });
        };
        add(0, "token_embd.weight".into(), vec![d, v], Role::TokenEmbd);
        for il in 0..s.n_layer {
            let mut blk = |name: &str, dims: Vec<u64>, role: Role| {
                add(il, format!("blk.{il}.{name}"), dims, role);
            };
            let biases = s.family == Family::Qwen2;
            blk("attn_norm.weight", vec![d], Role::Norm);
            blk("attn_q.weight", vec![d, q_out], Role::AttnQ);
            blk("attn_k.weight", vec![d, kv_out], Role::AttnK);
            blk("attn_v.weight", vec![d, kv_out], Role::AttnV);
            if biases {
                blk("attn_q.bias", vec![q_out], Role::Bias);
                blk("attn_k.bias", vec![kv_out], Role::Bias);
                blk("attn_v.bias", vec![kv_out], Role::Bias);
            }
            blk("attn_output.weight", vec![q_out, d], Role::AttnOutput);
            if s.family == Family::Gemma3 {
                blk("attn_q_norm.weight", vec![hd], Role::Norm);
                blk("attn_k_norm.weight", vec![hd], Role::Norm);
                blk("post_attention_norm.weight", vec![d], Role::Norm);
            }
            blk("ffn_norm.weight", vec![d], Role::Norm);
            blk("ffn_gate.weight", vec![d, ff], Role::FfnGate);
            blk("ffn_up.weight", vec![d, ff], Role::FfnUp);
            blk("ffn_down.weight", vec![ff, d], Role::FfnDown);
            if s.family == Family::Gemma3 {
                blk("post_ffw_norm.weight", vec![d], Role::Norm);
            }
        }
        add(0, "output_norm.weight".into(), vec![d], Role::Norm);
        if !s.tied {
            add(0, "output.weight".into(), vec![d, v], Role::Output);
        }
        Plan {
            shape,
            n_vocab,
            tensors,
        }
    }

    /// Parameters in all its tensors.
    pub fn n_params(&self) -> u64 {
        self.tensors.iter().map(TensorPlan::n_elements).sum()
    }

    /// The `{arch}.*` keys, as llama.cpp's converters write them for the real model.
    pub fn hparams(&self) -> Vec<(String, Value)> {
        let s = &self.shape;
        let arch = s.family.arch_name();
        let u = |v: usize| Value::U32(v as u32);
        let mut keys = vec![
            ("context_length", u(s.n_ctx_train)),
            ("embedding_length", u(s.d_model)),
            ("block_count", u(s.n_layer)),
            ("feed_forward_length", u(s.n_ff)),
            ("attention.head_count", u(s.n_head)),
            ("attention.head_count_kv", u(s.n_head_kv)),
            ("attention.key_length", u(s.head_dim)),
            ("attention.value_length", u(s.head_dim)),
            ("attention.layer_norm_rms_epsilon", Value::F32(s.rms_eps)),
            ("rope.freq_base", Value::F32(s.rope_base)),
        ];
        if let Some(factor) = s.rope_linear {
            keys.push(("rope.scaling.type", Value::String("linear".into())));
            keys.push(("rope.scaling.factor", Value::F32(factor)));
        }
        if let Some(window) = s.sliding_window {
            keys.push(("attention.sliding_window", u(window)));
        }
        if s.family == Family::Llama {
            keys.push(("rope.dimension_count", u(s.head_dim)));
            keys.push(("vocab_size", u(self.n_vocab)));
        }
        keys.into_iter()
            .map(|(k, v)| (format!("{arch}.{k}"), v))
            .collect()
    }
}
