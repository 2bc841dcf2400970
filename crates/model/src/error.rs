//! What can go wrong between a GGUF file and a forward pass.

use rullama_gguf::GgufError;
use rullama_quant::QuantError;

/// This crate's results: a [`ModelError`] unless said otherwise.
pub type Result<T, E = ModelError> = std::result::Result<T, E>;

/// Everything that can stop a model from loading or a step from running. Errors that come
/// from the file name its key or tensor; errors of a call name the offending argument.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// A `general.architecture` this crate has no graph for.
    #[error("unknown architecture `{0}` (supported: gemma3, llama, qwen2)")]
    UnknownArchitecture(String),

    /// A metadata key the architecture needs is absent.
    #[error("missing metadata key `{key}`")]
    MissingKey {
        /// The key.
        key: String,
    },

    /// Any other metadata problem (a key of the wrong type, an unreadable file).
    #[error(transparent)]
    Gguf(GgufError),

    /// Metadata that describes no model (a zero dimension, heads that do not divide), or a
    /// session of 0 positions.
    #[error("invalid model config: {0}")]
    InvalidConfig(String),

    /// A model feature this crate does not implement (mixtures of experts, RoPE scaling
    /// other than linear, Llama 3's RoPE factors), a tensor of a rank an executor does not
    /// take, or device sampling on an executor without it.
    #[error("not supported yet: {0}")]
    Unsupported(String),

    /// The required tensors the file lacks, found in one pass: the first
    /// [`MISSING_LISTED`] by name, and how many in all (a corrupt `block_count` can make
    /// millions).
    #[error("{}", missing_text(names, *count))]
    MissingTensors {
        /// The first few names.
        names: Vec<String>,
        /// How many are missing in all.
        count: usize,
    },

    /// A tensor whose dimensions are not the ones the config implies. Dimensions in GGML
    /// order (`[n_in, n_out]` for a matrix).
    #[error("tensor `{name}`: expected shape {expected:?}, found {found:?}")]
    ShapeMismatch {
        /// The tensor.
        name: String,
        /// The dimensions the config implies.
        expected: Vec<u64>,
        /// The dimensions the file has.
        found: Vec<u64>,
    },

    /// A weight the CPU executor could not decode (its type has no decoder in
    /// `rullama-quant`).
    #[error("tensor `{name}`: {source}")]
    Weight {
        /// The tensor.
        name: String,
        /// What the block formats said.
        source: QuantError,
    },

    /// A step of no tokens.
    #[error("empty input: at least one token is needed")]
    EmptyInput,

    /// A token id the model has no embedding for.
    #[error("token id {id} (index {index}) is outside the vocabulary of {n_vocab}")]
    TokenOutOfRange {
        /// Its index in the input.
        index: usize,
        /// The id.
        id: u32,
        /// The model's vocabulary size.
        n_vocab: usize,
    },

    /// A value a user set is outside its range (see [`crate::validate`]).
    #[error(transparent)]
    InvalidParam(#[from] crate::validate::InvalidParam),

    /// A session's KV cache that the host or the device cannot hold: `bytes` (`None`: past
    /// `u64`) for `n_ctx` positions, over `limit`; `fits`, the positions that would.
    #[error(
        "a context of {n_ctx} positions needs {} of KV cache, more than {limit}{}",
        crate::context::needed_text(bytes),
        crate::context::fits_text(fits)
    )]
    ContextTooLarge {
        /// The positions asked for.
        n_ctx: usize,
        /// The bytes they need (`None`: past `u64`).
        bytes: Option<u64>,
        /// What the cache has to fit in.
        limit: crate::context::MemoryLimit,
        /// The positions that would fit, where known.
        fits: Option<usize>,
    },

    /// A step whose positions run past the session's context.
    #[error("{n_tokens} tokens from position {start_pos} do not fit a context of {n_ctx}")]
    ContextOverflow {
        /// The step's first position.
        start_pos: usize,
        /// Its tokens.
        n_tokens: usize,
        /// The session's context.
        n_ctx: usize,
    },

    /// Perplexity asked of chunks the tokens do not hold (or too short to score).
    #[error("perplexity: {0}")]
    Perplexity(String),

    /// A step that starts past the cache's end: the positions between would be missing.
    #[error("start position {start_pos} leaves a gap: the cache holds {cached} positions")]
    PositionGap {
        /// The step's first position.
        start_pos: usize,
        /// Positions the cache holds.
        cached: usize,
    },

    /// A shape or use error found while recording a step (a bug in a graph, not in the file).
    #[error("backend: {0}")]
    Backend(String),

    /// Sampling failed (every logit -inf or NaN).
    #[error(transparent)]
    Sampler(#[from] crate::sampler::SamplerError),

    /// A LoRA adapter that cannot be read or does not fit the model.
    #[error(transparent)]
    Lora(#[from] crate::lora::LoraError),

    /// The GPU said no: no adapter, out of memory, a weight type without a kernel, ...
    #[error("GPU, {context}: {source}")]
    Gpu {
        /// What the executor was doing (`uploading blk.0.attn_q.weight`).
        context: String,
        /// The GPU layer's error.
        source: Box<rullama_kernels::GpuError>,
    },
}

impl ModelError {
    /// Whether the GPU could not allocate what was asked (a smaller context may fit).
    pub fn is_out_of_memory(&self) -> bool {
        matches!(self, ModelError::Gpu { source, .. } if source.is_out_of_memory())
    }
}

/// Missing tensors an error names before it only counts the rest.
pub const MISSING_LISTED: usize = 8;

fn missing_text(names: &[String], count: usize) -> String {
    let listed = names.len().min(MISSING_LISTED);
    let mut text = format!("missing tensors ({count}): {}", names[..listed].join(", "));
    if count > listed {
        text.push_str(&format!(" and {} more", count - listed));
    }
    text
}

impl ModelError {
    /// The missing-tensor error for `names`, found while checking (at most
    /// [`MISSING_LISTED`] of them kept), of `count` in all.
    pub(crate) fn missing(names: Vec<String>, count: usize) -> ModelError {
        ModelError::MissingTensors { names, count }
    }

    /// The error for one missing tensor.
    pub(crate) fn missing_one(name: impl Into<String>) -> ModelError {
        ModelError::missing(vec![name.into()], 1)
    }
}

impl From<GgufError> for ModelError {
    fn from(e: GgufError) -> Self {
        match e.kind() {
            GgufError::MissingKey { key } => ModelError::MissingKey { key: key.clone() },
            _ => ModelError::Gguf(e),
        }
    }
}
