//! `rullama merge MODEL --lora A[:SCALE] … --out M.gguf`: LoRA adapters merged into the
//! model's weights, written as a GGUF in the base's formats (`rullama_model::lora::merge`),
//! which then runs without the adapters, in any engine.

use std::path::PathBuf;

use rullama_gguf::{GgufFile, store};
use rullama_model::lora::merge::merge;
use rullama_model::{LoraAdapter, ModelConfig};

use super::CliError;
use super::lora::{self, LoraArg};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// A GGUF path, an Ollama name (its adapter layers are merged too, at scale 1) or a
    /// cached test model.
    model: String,
    /// A LoRA adapter to merge: a llama.cpp LoRA GGUF or a PEFT directory, at scale 1 or
    /// the one after `:`; repeat for several.
    #[arg(long = "lora", value_name = "FILE[:SCALE]")]
    lora: Vec<LoraArg>,
    /// The GGUF to write (whole or not at all: a temporary file beside it, renamed once
    /// complete).
    #[arg(long)]
    out: PathBuf,
}

pub fn run(args: &Args) -> Result<(), CliError> {
    let resolved = store::resolve(&args.model)?;
    let loras = lora::with_layers(resolved.adapters, &args.lora);
    if loras.is_empty() {
        return Err(CliError::Usage(
            "nothing to merge: give at least one --lora FILE[:SCALE]".into(),
        ));
    }
    if args.out == resolved.path {
        return Err(CliError::Usage(format!(
            "--out {} is the model itself: write the merged model elsewhere",
            args.out.display()
        )));
    }
    let file = GgufFile::open_ranged(&resolved.path)?;
    let cfg = ModelConfig::from_gguf(&file)?;
    let adapters = lora::open_all(&loras, &cfg)?;
    let refs: Vec<(&LoraAdapter, f32)> = adapters.iter().map(|(a, s)| (a, *s)).collect();
    let summary = merge(&file, &refs, &args.out)?;
    eprintln!(
        "merged {} adapter(s) into {} of {} tensors: {} ({} bytes)",
        refs.len(),
        summary.merged,
        summary.tensors,
        args.out.display(),
        summary.bytes
    );
    Ok(())
}
