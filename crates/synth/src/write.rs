//! Writing a synthetic model: the preset's tensors (`plan.rs`) in the mix's types
//! (`mix.rs`) with random weights (`weights.rs`), the architecture's keys and a tokenizer's
//! (`vocab.rs`), streamed through `TensorStream` so a model larger than memory is never
//! held whole.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use rullama_gguf::{GgmlType, Metadata, TensorInfo, TensorStream};
use rullama_quant::mix::{MixTensor, ModelFacts, tensor_types};

use crate::error::{Result, SynthError};
use crate::mix::Mix;
use crate::plan::Plan;
use crate::shapes::Preset;
use crate::vocab::Vocab;
use crate::weights;

/// What to write.
#[derive(Debug, Clone, Copy)]
pub struct Synth {
    /// The shapes and the default tokenizer.
    pub preset: Preset,
    /// Which GGML type each tensor gets.
    pub mix: Mix,
    /// Seed of the random weights: the same seed gives the same bytes.
    pub seed: u64,
    /// Threads that generate weights; the bytes do not depend on it.
    pub threads: usize,
}

/// What was written.
#[derive(Debug, Clone, Default)]
pub struct Summary {
    /// Parameters in all tensors.
    pub n_params: u64,
    /// The whole file.
    pub n_bytes: u64,
    /// Tensors and bytes per type.
    pub types: BTreeMap<String, (usize, u64)>,
}

impl Summary {
    /// `TYPE: n tensors, x MB; ...`.
    pub fn types_line(&self) -> String {
        let parts: Vec<String> = self
            .types
            .iter()
            .map(|(t, (n, bytes))| format!("{t}: {n} tensors, {:.1} MB", *bytes as f64 / 1e6))
            .collect();
        parts.join("; ")
    }
}

impl Synth {
    /// The tensors, with their types, of the model for a vocabulary of `n_vocab`.
    pub fn tensor_infos(&self, n_vocab: usize) -> Result<(Plan, Vec<TensorInfo>)> {
        let plan = Plan::new(self.preset.shape(), n_vocab);
        let s = &plan.shape;
        let facts = ModelFacts {
            arch: s.family.arch_name().to_string(),
            n_layer: s.n_layer,
            n_head: s.n_head,
            n_head_kv: s.n_head_kv,
            n_expert: 0,
        };
        // Written as F32 by a converter, then typed by llama-quantize's rule.
        let mix: Vec<MixTensor<'_>> = plan
            .tensors
            .iter()
            .map(|t| MixTensor {
                name: &t.name,
                dims: &t.dims,
                ggml_type: GgmlType::F32,
            })
            .collect();
        let types = tensor_types(self.mix.ftype(), &facts, &mix)?;
        let infos = plan
            .tensors
            .iter()
            .zip(types)
            .map(|(t, ggml_type)| {
                TensorInfo::new(t.name.as_str(), &t.dims, ggml_type, 0).map_err(|error| {
                    SynthError::Shape {
                        tensor: t.name.clone(),
                        error,
                    }
                })
            })
            .collect::<Result<_>>()?;
        Ok((plan, infos))
    }

    /// The metadata: `general.*`, the architecture's keys, the tokenizer's.
    fn metadata(&self, plan: &Plan, vocab: &Vocab) -> Metadata {
        let mut meta = Metadata::new();
        let arch = plan.shape.family.arch_name();
        meta.insert("general.architecture", arch);
        let name = format!(
            "synthetic {} {} (random weights)",
            self.preset.name(),
            self.mix.name()
        );
        meta.insert("general.name", name);
        meta.insert("general.file_type", self.mix.file_type());
        // GGML_QNT_VERSION, which llama-quantize writes.
        meta.insert("general.quantization_version", 2u32);
        for (key, value) in plan.hparams() {
            meta.insert(key, value);
        }
        for (key, value) in &vocab.keys {
            meta.insert(key.clone(), value.clone());
        }
        meta
    }

    /// Write the model to `w`, one tensor at a time; returns what was written.
    pub fn write_to<W: Write>(&self, vocab: &Vocab, w: W) -> Result<Summary> {
        let (plan, infos) = self.tensor_infos(vocab.n_tokens)?;
        let meta = self.metadata(&plan, vocab);
        let mut stream = TensorStream::new(w, &meta, infos.clone())?;
        let mut summary = Summary {
            n_params: plan.n_params(),
            ..Summary::default()
        };
        let mut buf = Vec::new();
        for (i, (t, info)) in plan.tensors.iter().zip(&infos).enumerate() {
            buf.clear();
            buf.resize(info.n_bytes as usize, 0);
            let dist = t.dist();
            weights::fill(
                info.ggml_type,
                dist,
                self.seed,
                i as u64,
                self.threads,
                &mut buf,
            );
            stream.write_tensor(&buf)?;
            let entry = summary.types.entry(info.ggml_type.to_string()).or_default();
            *entry = (entry.0 + 1, entry.1 + info.n_bytes);
        }
        summary.n_bytes = stream.finish()?;
        Ok(summary)
    }

    /// Write the model to `out` (through `out.partial`, renamed once complete).
    pub fn write(&self, vocab: &Vocab, out: &Path) -> Result<Summary> {
        let partial = out.with_extension("gguf.partial");
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |error| SynthError::Io { path, error }
        };
        let file = File::create(&partial).map_err(io(&partial))?;
        let summary = self
            .write_to(vocab, BufWriter::with_capacity(8 << 20, &file))
            .map_err(|e| match e {
                SynthError::Gguf(e) => SynthError::Gguf(e.in_file(&partial)),
                e => e,
            })?;
        file.sync_all().map_err(io(&partial))?;
        std::fs::rename(&partial, out).map_err(io(out))?;
        Ok(summary)
    }
}
