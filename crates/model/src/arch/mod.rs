//! The architectures: one file each, holding the rules llama.cpp applies that the GGUF file
//! does not store (`rules`), the weights it loads (`load`) and its graph (`forward`).

pub(crate) mod gemma3;
pub(crate) mod llama;
pub(crate) mod qwen2;

use rullama_gguf::Metadata;

use crate::backend::Sequence;
use crate::config::ModelConfig;
use crate::error::{ModelError, Result};
use crate::graph::Graph;
use crate::graph::weights::Load;

/// `general.architecture` values we run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Arch {
    /// `gemma3`: Gemma 3's text model.
    Gemma3,
    /// `llama`: Llama 2 and 3, SmolLM2 and the other files that call themselves llama.
    Llama,
    /// `qwen2`: Qwen 2 and 2.5 (Llama's block with q/k/v biases).
    Qwen2,
}

impl Arch {
    /// The architecture of a `general.architecture` value;
    /// [`ModelError::UnknownArchitecture`] for one we do not run.
    pub fn from_name(name: &str) -> Result<Arch> {
        Ok(match name {
            "gemma3" => Arch::Gemma3,
            "llama" => Arch::Llama,
            "qwen2" => Arch::Qwen2,
            other => return Err(ModelError::UnknownArchitecture(other.to_string())),
        })
    }

    /// Its `general.architecture` value.
    pub fn name(self) -> &'static str {
        match self {
            Arch::Gemma3 => "gemma3",
            Arch::Llama => "llama",
            Arch::Qwen2 => "qwen2",
        }
    }

    pub(crate) fn apply_rules(self, meta: &Metadata, cfg: &mut ModelConfig) -> Result<()> {
        match self {
            Arch::Gemma3 => gemma3::rules(meta, cfg),
            Arch::Llama => llama::rules(meta, cfg),
            Arch::Qwen2 => qwen2::rules(meta, cfg),
        }
    }
}

/// The weights of a model of any architecture.
#[derive(Debug)]
pub(crate) enum ArchWeights<W> {
    Gemma3(gemma3::Weights<W>),
    Llama(llama::Weights<W>),
    Qwen2(llama::Weights<W>),
}

impl<W: Clone> ArchWeights<W> {
    pub fn load<L: Load<W = W>>(cfg: &ModelConfig, l: &mut L) -> Result<Self> {
        Ok(match cfg.arch {
            Arch::Gemma3 => ArchWeights::Gemma3(gemma3::Weights::load(cfg, l)?),
            Arch::Llama => ArchWeights::Llama(llama::Weights::load(cfg, l)?),
            Arch::Qwen2 => ArchWeights::Qwen2(qwen2::load_weights(cfg, l)?),
        })
    }
}

/// Run one step of the graph; returns the logits tensor.
pub(crate) fn forward<S: Sequence>(g: &mut Graph<'_, S>, w: &ArchWeights<S::Weight>) -> S::Tensor {
    match w {
        ArchWeights::Gemma3(w) => gemma3::forward(g, w),
        ArchWeights::Llama(w) => llama::forward(g, w),
        ArchWeights::Qwen2(w) => llama::forward(g, w),
    }
}
