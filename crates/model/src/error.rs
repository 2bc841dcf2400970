//! What can go wrong between a GGUF file and a forward pass.

use rullama_gguf::GgufError;
use rullama_quant::QuantError;

pub type Result<T, E = ModelError> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error("unknown architecture `{0}` (supported: gemma3, llama, qwen2)")]
    UnknownArchitecture(String),

    #[error("missing metadata key `{key}`")]
    MissingKey { key: String },

    /// Any other metadata problem (a key of the wrong type, an unreadable file).
    #[error(transparent)]
    Gguf(GgufError),

    #[error("invalid model config: {0}")]
    InvalidConfig(String),

    #[error("not supported yet: {0}")]
    Unsupported(String),

    /// The required tensors the file lacks, found in one pass: the first
    /// [`MISSING_LISTED`] by name, and how many in all (a corrupt `block_count` can make
    /// millions).
    #[error("{}", missing_text(names, *count))]
    MissingTensors { names: Vec<String>, count: usize },

    /// Dimensions in GGML order (`[n_in, n_out]` for a matrix).
    #[error("tensor `{name}`: expected shape {expected:?}, found {found:?}")]
    ShapeMismatch {
        name: String,
        expected: Vec<u64>,
        found: Vec<u64>,
    },

    #[error("tensor `{name}`: {source}")]
    Weight { name: String, source: QuantError },

    #[error("empty input: at least one token is needed")]
    EmptyInput,

    #[error("token id {id} (index {index}) is outside the vocabulary of {n_vocab}")]
    TokenOutOfRange {
        index: usize,
        id: u32,
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
        n_ctx: usize,
        bytes: Option<u64>,
        limit: crate::context::MemoryLimit,
        fits: Option<usize>,
    },

    #[error("{n_tokens} tokens from position {start_pos} do not fit a context of {n_ctx}")]
    ContextOverflow {
        start_pos: usize,
        n_tokens: usize,
        n_ctx: usize,
    },

    /// Perplexity asked of chunks the tokens do not hold (or too short to score).
    #[error("perplexity: {0}")]
    Perplexity(String),

    #[error("start position {start_pos} leaves a gap: the cache holds {cached} positions")]
    PositionGap { start_pos: usize, cached: usize },

    /// A shape or use error found while recording a step (a bug in a graph, not in the file).
    #[error("backend: {0}")]
    Backend(String),

    /// Sampling failed (every logit -inf or NaN).
    #[error(transparent)]
    Sampler(#[from] crate::sampler::SamplerError),

    /// The GPU said no: no adapter, out of memory, a weight type without a kernel, ...
    #[error("GPU, {context}: {source}")]
    Gpu {
        context: String,
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
