//! [`ModelConfig`]: the hyper-parameters of a model, read from GGUF metadata, plus the rules
//! llama.cpp applies per architecture that the file does not store (those live in
//! `arch/<name>.rs`, function `rules`).

use rullama_gguf::{ByteSource, GgufFile, Metadata};

use crate::arch::Arch;
use crate::error::{ModelError, Result};

/// Which dimensions of a head form a rotated pair, and the non-linearity of a gated FFN:
/// one type each, shared with the kernels that implement them.
pub use rullama_kernels::{Activation, RopeStyle};

/// RoPE frequencies of one layer: `theta_i = pos * freq_scale * base^(-2i/n_rot)`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RopeFreqs {
    /// The frequency base (`rope.freq_base`; Gemma 3's sliding layers: 10000).
    pub base: f32,
    /// `1 / rope.scaling.factor` for linear scaling, 1 without.
    pub freq_scale: f32,
}

/// What differs between layers.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LayerConfig {
    /// Sliding-window attention: a query at `p` sees keys at `j` with `p - j < window`.
    pub window: Option<usize>,
    /// The layer's RoPE frequencies.
    pub rope: RopeFreqs,
}

/// Everything the graph needs to know about a model's shape and arithmetic.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelConfig {
    /// The architecture (`general.architecture`).
    pub arch: Arch,
    /// Transformer blocks (`block_count`).
    pub n_layer: usize,
    /// Width of the residual stream (`embedding_length`).
    pub d_model: usize,
    /// Query heads (`attention.head_count`).
    pub n_head: usize,
    /// Key/value heads (`attention.head_count_kv`; fewer than `n_head` for grouped-query
    /// attention).
    pub n_head_kv: usize,
    /// Dims of a query or key head (`attention.key_length`, default `d_model / n_head`).
    pub head_dim_k: usize,
    /// Dims of a value head (`attention.value_length`, default `d_model / n_head`).
    pub head_dim_v: usize,
    /// Width of the feed-forward block's hidden layer (`feed_forward_length`).
    pub n_ff: usize,
    /// Tokens in the vocabulary: the rows of `token_embd.weight`.
    pub n_vocab: usize,
    /// The context the model was trained with (`context_length`).
    pub n_ctx_train: usize,
    /// The RMS norms' epsilon (`attention.layer_norm_rms_epsilon`).
    pub rms_eps: f32,
    /// Rotated dimensions per head (`rope.dimension_count`, default `head_dim_k`).
    pub n_rot: usize,
    /// Which dims of a head pair up in RoPE (NeoX halves for Gemma and Qwen 2, neighbours
    /// for Llama).
    pub rope_style: RopeStyle,
    /// Multiplies `q·k` before the softmax.
    pub attn_scale: f32,
    /// `cap * tanh(s / cap)` on attention scores (Gemma 2), if any.
    pub attn_softcap: Option<f32>,
    /// Multiplies the token embeddings (Gemma: `sqrt(d_model)`).
    pub embed_scale: Option<f32>,
    /// `cap * tanh(logit / cap)` on the output logits, if any.
    pub final_softcap: Option<f32>,
    /// The gated FFN's non-linearity (tanh-approximated GELU for Gemma, SiLU otherwise).
    pub activation: Activation,
    /// One entry per layer.
    pub layers: Vec<LayerConfig>,
}

impl ModelConfig {
    /// Read the config of the model in `file` (the vocabulary size comes from `token_embd`).
    pub fn from_gguf<S: ByteSource>(file: &GgufFile<S>) -> Result<ModelConfig> {
        let meta = file.metadata();
        let n_vocab = match file.tensor_info("token_embd.weight") {
            Some(t) => t.dims.get(1).copied().unwrap_or(0) as usize,
            None => return Err(ModelError::missing_one("token_embd.weight")),
        };
        // Every layer has tensors of its own: a block count above the file's tensor count is
        // a corrupt file, and caught before per-layer tables are sized by it.
        let n_layer = meta.arch_usize("block_count")?;
        let n_tensors = file.tensors().len();
        if n_layer > n_tensors {
            return Err(ModelError::InvalidConfig(format!(
                "block_count {n_layer} is more than the file's {n_tensors} tensors (each layer \
                 has its own)"
            )));
        }
        ModelConfig::from_metadata(meta, n_vocab)
    }

    /// Read the config from metadata, with the vocabulary size given.
    pub fn from_metadata(meta: &Metadata, n_vocab: usize) -> Result<ModelConfig> {
        let arch = Arch::from_name(meta.architecture()?)?;
        let mut cfg = common(meta, arch, n_vocab)?;
        arch.apply_rules(meta, &mut cfg)?;
        cfg.validate()?;
        Ok(cfg)
    }

    /// Query heads per KV head.
    pub fn gqa_group(&self) -> usize {
        self.n_head / self.n_head_kv
    }

    fn validate(&self) -> Result<()> {
        let bad = |what: String| Err(ModelError::InvalidConfig(what));
        let dims = [
            ("block_count", self.n_layer),
            ("embedding_length", self.d_model),
            ("head_count", self.n_head),
            ("head_count_kv", self.n_head_kv),
            ("key_length", self.head_dim_k),
            ("value_length", self.head_dim_v),
            ("feed_forward_length", self.n_ff),
            ("vocabulary", self.n_vocab),
            // The default context is the training context: 0 would make it one position.
            ("context_length", self.n_ctx_train),
        ];
        if let Some((name, _)) = dims.iter().find(|(_, v)| *v == 0) {
            return bad(format!("{name} is 0"));
        }
        if !self.n_head.is_multiple_of(self.n_head_kv) {
            return bad(format!(
                "{} query heads are not a multiple of {} KV heads",
                self.n_head, self.n_head_kv
            ));
        }
        if self.n_rot > self.head_dim_k || !self.n_rot.is_multiple_of(2) {
            return bad(format!(
                "rope dimension {} must be even and at most the head dim {}",
                self.n_rot, self.head_dim_k
            ));
        }
        Ok(())
    }
}

/// More layers than any model has (the deepest have a few hundred): a ceiling on what the
/// per-layer tables are sized by when only metadata is at hand.
const MAX_LAYERS: usize = 1 << 16;

/// The keys every architecture shares, with llama.cpp's defaults; per-architecture fields
/// get neutral values that `rules` overwrites.
fn common(meta: &Metadata, arch: Arch, n_vocab: usize) -> Result<ModelConfig> {
    let n_layer = meta.arch_usize("block_count")?;
    if n_layer > MAX_LAYERS {
        return Err(ModelError::InvalidConfig(format!(
            "block_count {n_layer} is more than {MAX_LAYERS}"
        )));
    }
    let d_model = meta.arch_usize("embedding_length")?;
    let n_head = meta.arch_usize("attention.head_count")?;
    let n_head_kv = meta
        .arch_opt::<usize>("attention.head_count_kv")?
        .unwrap_or(n_head);
    let default_head_dim = d_model.checked_div(n_head).unwrap_or(0);
    let head_dim_k = meta
        .arch_opt::<usize>("attention.key_length")?
        .unwrap_or(default_head_dim);
    let head_dim_v = meta
        .arch_opt::<usize>("attention.value_length")?
        .unwrap_or(default_head_dim);
    let rope = RopeFreqs {
        base: meta.arch_opt::<f32>("rope.freq_base")?.unwrap_or(10_000.0),
        freq_scale: rope_freq_scale(meta)?,
    };
    Ok(ModelConfig {
        arch,
        n_layer,
        d_model,
        n_head,
        n_head_kv,
        head_dim_k,
        head_dim_v,
        n_ff: meta.arch_usize("feed_forward_length")?,
        n_vocab,
        n_ctx_train: meta.arch_usize("context_length")?,
        rms_eps: meta.arch_f32("attention.layer_norm_rms_epsilon")?,
        n_rot: meta
            .arch_opt::<usize>("rope.dimension_count")?
            .unwrap_or(head_dim_k),
        rope_style: RopeStyle::Neox,
        attn_scale: 1.0 / (head_dim_k as f32).sqrt(),
        attn_softcap: None,
        embed_scale: None,
        final_softcap: None,
        activation: Activation::Silu,
        layers: vec![LayerConfig { window: None, rope }; n_layer],
    })
}

/// `rope.scaling.type` / `rope.scaling.factor` (or the older `rope.scale_linear`), as
/// llama.cpp reads them: `freq_scale = 1 / factor`. Only linear scaling is implemented.
fn rope_freq_scale(meta: &Metadata) -> Result<f32> {
    let kind = meta
        .arch_opt::<&str>("rope.scaling.type")?
        .unwrap_or("linear");
    if !matches!(kind, "none" | "linear") {
        return Err(ModelError::Unsupported(format!(
            "rope scaling type `{kind}`"
        )));
    }
    let factor = match meta.arch_opt::<f32>("rope.scaling.factor")? {
        Some(f) => Some(f),
        None => meta.arch_opt::<f32>("rope.scale_linear")?,
    };
    Ok(match (kind, factor) {
        ("linear", Some(f)) if f > 0.0 => 1.0 / f,
        _ => 1.0,
    })
}

/// An optional positive f32 key: absent or `<= 0` is `None`.
pub(crate) fn positive_f32(meta: &Metadata, suffix: &str) -> Result<Option<f32>> {
    Ok(meta.arch_opt::<f32>(suffix)?.filter(|&v| v > 0.0))
}
