//! `cargo xtask synth`: a GGUF with the shapes of a real model (`shapes.rs`), random
//! weights of real magnitudes (`weights.rs`) in llama.cpp's quant mix (`mix.rs`) and the
//! tokenizer of a real model (`vocab.rs`), so llama.cpp and rullama can both load it: speed
//! tests beyond the models we can download. `--vocab-only` writes just the tokenizer, small
//! enough to carry to the machine that generates the model.

mod mix;
mod plan;
mod shapes;
mod vocab;
mod weights;

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::time::Instant;

use rullama_gguf::{Metadata, TensorInfo, TensorStream};

pub use mix::Mix;
use plan::Plan;
pub use shapes::Preset;
use vocab::Vocab;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The real model whose shapes to take.
    #[arg(long, value_enum, required_unless_present = "vocab_only")]
    pub arch: Option<Preset>,
    /// The quant mix, as llama-quantize makes it.
    #[arg(long, value_enum, default_value = "q4_k_m")]
    pub quant: Mix,
    /// A GGUF (a model, or a --vocab-only file) of the same family whose tokenizer to copy;
    /// the vocabulary size comes from it.
    #[arg(long)]
    pub tokenizer: PathBuf,
    /// Where to write the GGUF.
    #[arg(long)]
    pub out: PathBuf,
    /// Seed of the random weights: the same seed gives the same bytes.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Write only the tokenizer (and the source's general.* keys), no tensors.
    #[arg(long, conflicts_with = "arch")]
    pub vocab_only: bool,
    /// Threads that generate weights (default: every core).
    #[arg(long)]
    pub threads: Option<usize>,
}

pub fn run(args: &Args) -> Result<(), String> {
    let start = Instant::now();
    if args.vocab_only {
        let n = vocab::write_vocab_only(&args.tokenizer, &args.out)?;
        let mb = n as f64 / 1e6;
        eprintln!("wrote {} ({mb:.2} MB, tokenizer only)", args.out.display());
        return Ok(());
    }
    let preset = args.arch.ok_or("--arch is required without --vocab-only")?;
    let vocab = Vocab::open(&args.tokenizer)?;
    let family = preset.shape().family.arch_name();
    if vocab.source_arch.as_deref() != Some(family) {
        eprintln!(
            "note: the tokenizer comes from a `{}` file, the model is `{family}`",
            vocab.source_arch.as_deref().unwrap_or("?")
        );
    }
    let threads = args
        .threads
        .or_else(|| std::thread::available_parallelism().ok().map(|n| n.get()))
        .unwrap_or(1);
    let synth = Synth {
        preset,
        mix: args.quant,
        seed: args.seed,
        threads,
    };
    let summary = synth.write(&vocab, &args.out)?;
    eprintln!(
        "wrote {}: {preset} {mix}, {:.3} B parameters, {:.3} GB, vocabulary {} ({:.1} s)\n  {}",
        args.out.display(),
        summary.n_params as f64 / 1e9,
        summary.n_bytes as f64 / 1e9,
        vocab.n_tokens,
        start.elapsed().as_secs_f64(),
        summary.types_line(),
        preset = preset.name(),
        mix = args.quant.name(),
    );
    Ok(())
}

/// What to write.
#[derive(Debug, Clone, Copy)]
pub struct Synth {
    pub preset: Preset,
    pub mix: Mix,
    pub seed: u64,
    pub threads: usize,
}

/// What was written.
#[derive(Debug, Clone, Default)]
pub struct Summary {
    pub n_params: u64,
    /// The whole file.
    pub n_bytes: u64,
    /// Tensors and bytes per type.
    pub types: BTreeMap<String, (usize, u64)>,
}

impl Summary {
    fn types_line(&self) -> String {
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
    pub fn tensor_infos(&self, n_vocab: usize) -> Result<(Plan, Vec<TensorInfo>), String> {
        let plan = Plan::new(self.preset.shape(), n_vocab);
        let (n_layer, tied) = (plan.shape.n_layer, plan.shape.tied);
        let infos = plan
            .tensors
            .iter()
            .map(|t| {
                let ggml_type = self.mix.type_of(t, n_layer, tied);
                TensorInfo::new(t.name.as_str(), &t.dims, ggml_type, 0)
                    .map_err(|e| format!("{}: {e}", t.name))
            })
            .collect::<Result<_, _>>()?;
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

    /// Write the model to `out` (through `out.partial`, renamed once complete).
    pub fn write(&self, vocab: &Vocab, out: &Path) -> Result<Summary, String> {
        let (plan, infos) = self.tensor_infos(vocab.n_tokens)?;
        let meta = self.metadata(&plan, vocab);
        let partial = out.with_extension("gguf.partial");
        let io = |e: &dyn std::fmt::Display| format!("{}: {e}", partial.display());
        let file = File::create(&partial).map_err(|e| io(&e))?;
        let mut stream = TensorStream::new(
            BufWriter::with_capacity(8 << 20, &file),
            &meta,
            infos.clone(),
        )
        .map_err(|e| io(&e))?;
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
            stream.write_tensor(&buf).map_err(|e| io(&e))?;
            let entry = summary.types.entry(info.ggml_type.to_string()).or_default();
            *entry = (entry.0 + 1, entry.1 + info.n_bytes);
        }
        summary.n_bytes = stream.finish().map_err(|e| io(&e))?;
        file.sync_all().map_err(|e| io(&e))?;
        std::fs::rename(&partial, out).map_err(|e| format!("{}: {e}", out.display()))?;
        Ok(summary)
    }
}
