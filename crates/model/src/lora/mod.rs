//! LoRA adapters: low-rank updates `W' = W + scale · B·A` of a model's projections, applied
//! in the graph as llama.cpp's `build_lora_mm` does (`y = W·x + scale · B·(A·x)`), never
//! merged into the base weights.
//!
//! - [`LoraAdapter`]: one adapter read into host memory, as f32 pairs keyed by the base
//!   tensor they update; from a llama.cpp LoRA GGUF ([`LoraAdapter::open`], `gguf.rs`) or a
//!   PEFT directory ([`LoraAdapter::open_peft`], [`peft`]); written back as either
//!   ([`LoraAdapter::to_gguf`], [`peft::write`]).
//! - `attach.rs`: checks an adapter against a model (architecture, tensor names, shapes) and
//!   turns the adapters applied together into one pair of device matrices per projection,
//!   which `Graph::linear` multiplies.
//! - [`merge`]: the adapters merged into the weights, written as a GGUF of the base's
//!   formats.
//!
//! The word is "LoRA adapter" throughout: a bare "adapter" in the GPU code is wgpu's (the
//! physical device).

pub(crate) mod attach;
pub mod base;
mod error;
mod gguf;
pub mod merge;
pub mod peft;
mod peft_write;

use std::path::Path;

pub use error::LoraError;

use crate::config::ModelConfig;

/// One projection's update: `A` (`rank` rows of `n_in`) and `B` (`n_out` rows of `rank`),
/// in f32, row-major. In GGML dims (as the GGUF stores them) `A` is `[n_in, rank]` and `B`
/// `[rank, n_out]`, the base tensor `[n_in, n_out]`.
#[derive(Debug, Clone, PartialEq)]
pub struct LoraPair {
    /// The base tensor it updates (`blk.0.attn_q.weight`).
    pub base: String,
    /// Columns of the base matrix (its input width).
    pub n_in: usize,
    /// Rows of the base matrix (its output width).
    pub n_out: usize,
    /// The pair's rank.
    pub rank: usize,
    /// `rank * n_in` values.
    pub a: Vec<f32>,
    /// `n_out * rank` values.
    pub b: Vec<f32>,
}

/// A LoRA adapter in host memory: which architecture it is for, its alpha, its pairs.
#[derive(Debug, Clone)]
pub struct LoraAdapter {
    file: String,
    arch: String,
    alpha: f32,
    pairs: Vec<LoraPair>,
    /// The fingerprint of the base it was trained on, where the file records one
    /// ([`base::fingerprint`]).
    base: Option<u64>,
}

impl LoraAdapter {
    /// Reads the llama.cpp LoRA GGUF at `path` (`general.type = adapter`,
    /// `adapter.type = lora`, tensors `<base>.lora_a` / `<base>.lora_b`).
    pub fn open(path: impl AsRef<Path>) -> Result<LoraAdapter, LoraError> {
        let path = path.as_ref();
        let file = path.display().to_string();
        let bytes = std::fs::read(path).map_err(|source| LoraError::Io {
            file: file.clone(),
            source,
        })?;
        LoraAdapter::from_gguf_bytes(bytes, &file)
    }

    /// Reads the PEFT LoRA directory `dir` (`adapter_config.json`,
    /// `adapter_model.safetensors`) for a model of `cfg`, in the GGUF names and layouts
    /// llama.cpp's converter would give it ([`peft`]).
    pub fn open_peft(dir: impl AsRef<Path>, cfg: &ModelConfig) -> Result<LoraAdapter, LoraError> {
        peft::read(dir.as_ref(), cfg)
    }

    /// A PEFT directory ([`LoraAdapter::open_peft`]) where `path` is one, else a LoRA GGUF
    /// ([`LoraAdapter::open`]).
    pub fn open_for(path: impl AsRef<Path>, cfg: &ModelConfig) -> Result<LoraAdapter, LoraError> {
        let path = path.as_ref();
        if peft::is_peft_dir(path) {
            LoraAdapter::open_peft(path, cfg)
        } else {
            LoraAdapter::open(path)
        }
    }

    /// A LoRA GGUF held in memory; `file` names it in errors.
    pub fn from_gguf_bytes(bytes: Vec<u8>, file: &str) -> Result<LoraAdapter, LoraError> {
        let gguf = rullama_gguf::GgufFile::from_bytes(bytes).map_err(|source| LoraError::Gguf {
            file: file.to_string(),
            source,
        })?;
        gguf::read(&gguf, file)
    }

    /// An adapter from its parts (a PEFT directory's, converted): checked as a file's would
    /// be (ranks above 0, lengths matching the shapes, a finite alpha).
    pub fn from_pairs(
        file: &str,
        arch: &str,
        alpha: f32,
        pairs: Vec<LoraPair>,
    ) -> Result<LoraAdapter, LoraError> {
        let invalid = |what: String| LoraError::Invalid {
            file: file.to_string(),
            what,
        };
        if !alpha.is_finite() {
            return Err(invalid(format!("alpha {alpha} is not a finite number")));
        }
        if pairs.is_empty() {
            return Err(invalid("it holds no LoRA pair".into()));
        }
        for p in &pairs {
            let sizes = [p.rank * p.n_in, p.n_out * p.rank];
            if p.rank == 0 || p.n_in == 0 || p.n_out == 0 {
                return Err(invalid(format!("`{}`: a dimension of 0", p.base)));
            }
            if [p.a.len(), p.b.len()] != sizes {
                return Err(invalid(format!(
                    "`{}`: {} and {} values for A and B, expected {} and {}",
                    p.base,
                    p.a.len(),
                    p.b.len(),
                    sizes[0],
                    sizes[1]
                )));
            }
        }
        Ok(LoraAdapter {
            file: file.to_string(),
            arch: arch.to_string(),
            alpha,
            pairs,
            base: None,
        })
    }

    /// The adapter recording `fingerprint` as the base it was trained on
    /// ([`base::fingerprint`]): applying or merging it onto a model of another fingerprint is
    /// refused.
    pub fn with_base(mut self, fingerprint: u64) -> LoraAdapter {
        self.base = Some(fingerprint);
        self
    }

    /// The fingerprint of the base it was trained on, if it records one.
    pub fn base(&self) -> Option<u64> {
        self.base
    }

    /// The file it was read from (or the label it was given).
    pub fn file(&self) -> &str {
        &self.file
    }

    /// The `general.architecture` it was made for.
    pub fn arch(&self) -> &str {
        &self.arch
    }

    /// `adapter.lora.alpha`; 0 when the file has none.
    pub fn alpha(&self) -> f32 {
        self.alpha
    }

    /// Its pairs, one per base tensor.
    pub fn pairs(&self) -> &[LoraPair] {
        &self.pairs
    }

    /// The factor of `B·A` for `pair` at the user's `scale`: llama.cpp's
    /// `llama_adapter_lora_weight::get_scale`, `scale * alpha / rank`, or `scale` alone when
    /// the adapter has no alpha (0).
    pub fn pair_scale(&self, pair: &LoraPair, scale: f32) -> f32 {
        if self.alpha == 0.0 {
            scale
        } else {
            scale * self.alpha / pair.rank as f32
        }
    }
}
