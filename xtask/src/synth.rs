//! `cargo xtask synth`: the command line over `rullama-synth`. A GGUF with the shapes of a
//! real model or a tiny one, random weights in llama.cpp's quant mix, and a tokenizer: a
//! real GGUF's (`--tokenizer`) or, without one, a synthetic one of the family's kind.
//! `--vocab-only` writes just a real file's tokenizer, small enough to carry to the machine
//! that generates the model.

use std::path::PathBuf;
use std::time::Instant;

use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use rullama_synth::{Mix, Preset, Synth, Vocab};

#[derive(clap::Args, Debug)]
#[command(after_help = "\
The tiny-* presets are for tests: a few MB, they run on the CPU reference in milliseconds. \
Without --tokenizer a model takes its family's synthetic tokenizer (512 tokens, padded with \
unused ones to the real vocabulary's size for the full-size presets: SPM with \
byte fallback for gemma3 and Llama 2 style llama, byte-level BPE for qwen2 and SmolLM2 \
style llama), with Gemma's or ChatML's chat template where the family has one:

  cargo xtask synth --arch tiny-qwen2 --quant q8_0 --out tiny-qwen2.gguf")]
pub struct Args {
    /// The model whose shapes to take: a real one, or a tiny one for tests.
    #[arg(long, value_parser = preset_parser(), required_unless_present_any = ["vocab_only", "lora_for"])]
    pub arch: Option<Preset>,
    /// The quant mix, as llama-quantize makes it.
    #[arg(long, value_parser = mix_parser(), default_value = "q4_k_m")]
    pub quant: Mix,
    /// A GGUF (a model, or a --vocab-only file) of the same family whose tokenizer to copy;
    /// the vocabulary size comes from it. Without it, the family's synthetic tokenizer.
    #[arg(long, required_if_eq("vocab_only", "true"))]
    pub tokenizer: Option<PathBuf>,
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
    /// Write a random LoRA adapter (llama.cpp's GGUF) for this model instead of a model: a
    /// pair of rank `--lora-rank` on every projection of every layer, alpha = rank, A and B in
    /// F32, B scaled so each update's root mean square is 5% of its matrix's.
    #[arg(long, conflicts_with_all = ["arch", "vocab_only"])]
    pub lora_for: Option<PathBuf>,
    /// The rank of `--lora-for`'s pairs.
    #[arg(long, default_value_t = 8, requires = "lora_for")]
    pub lora_rank: usize,
}

fn preset_parser() -> impl TypedValueParser<Value = Preset> {
    let values = Preset::ALL.map(|p| PossibleValue::new(p.name()).help(p.about()));
    PossibleValuesParser::new(values)
        .try_map(|name| Preset::from_name(&name).ok_or(format!("no preset `{name}`")))
}

fn mix_parser() -> impl TypedValueParser<Value = Mix> {
    PossibleValuesParser::new(Mix::ALL.map(Mix::cli_name))
        .try_map(|name| Mix::from_name(&name).ok_or(format!("no mix `{name}`")))
}

pub fn run(args: &Args) -> Result<(), String> {
    let start = Instant::now();
    if args.vocab_only {
        let tokenizer = args
            .tokenizer
            .as_ref()
            .ok_or("--vocab-only needs --tokenizer")?;
        let n = rullama_synth::write_vocab_only(tokenizer, &args.out).map_err(|e| e.to_string())?;
        let mb = n as f64 / 1e6;
        eprintln!("wrote {} ({mb:.2} MB, tokenizer only)", args.out.display());
        return Ok(());
    }
    if let Some(model) = &args.lora_for {
        return write_lora(model, args);
    }
    let preset = args
        .arch
        .ok_or("--arch is required without --vocab-only or --lora-for")?;
    let family = preset.shape().family.arch_name();
    let vocab = match &args.tokenizer {
        Some(path) => Vocab::open(path).map_err(|e| e.to_string())?,
        // A synthetic tokenizer is a few hundred tokens; a full-size preset pads it to its
        // real vocabulary (the embedding and output rows are most of a small model).
        None if preset.is_tiny() => preset.tokenizer_style().vocab(),
        None => preset
            .tokenizer_style()
            .vocab()
            .padded_to(preset.shape().n_vocab),
    };
    if let Some(source) = vocab.source_arch.as_deref().filter(|&a| a != family) {
        eprintln!("note: the tokenizer comes from a `{source}` file, the model is `{family}`");
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
    let summary = synth.write(&vocab, &args.out).map_err(|e| e.to_string())?;
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

/// `--lora-for`: a random adapter for the model at `model`, written to `args.out`.
fn write_lora(model: &std::path::Path, args: &Args) -> Result<(), String> {
    use rullama_gguf::{GgmlType, GgufFile};
    use rullama_synth::lora;
    let bytes = std::fs::read(model).map_err(|e| format!("{}: {e}", model.display()))?;
    let file = GgufFile::from_bytes(bytes).map_err(|e| format!("{}: {e}", model.display()))?;
    let arch = file
        .metadata()
        .architecture()
        .map_err(|e| format!("{}: {e}", model.display()))?
        .to_string();
    let targets = lora::projections(&file, |_| true);
    if targets.is_empty() {
        return Err(format!("{}: no projection to adapt", model.display()));
    }
    let rank = args.lora_rank.max(1);
    let pairs = lora::random_pairs(&file, &targets, rank, 1.0, 0.05, args.seed)
        .map_err(|e| e.to_string())?;
    let gguf = lora::adapter_gguf(
        &arch,
        Some(rank as f32),
        &pairs,
        GgmlType::F32,
        GgmlType::F32,
    )
    .map_err(|e| e.to_string())?;
    std::fs::write(&args.out, &gguf).map_err(|e| format!("{}: {e}", args.out.display()))?;
    eprintln!(
        "wrote {}: a rank-{rank} LoRA adapter for {} ({} pairs, {:.1} MB)",
        args.out.display(),
        model.display(),
        pairs.len(),
        gguf.len() as f64 / 1e6
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: Args,
    }

    fn parse(line: &str) -> Result<Args, clap::Error> {
        let words = std::iter::once("synth").chain(line.split_whitespace());
        Cli::try_parse_from(words).map(|c| c.args)
    }

    #[test]
    fn presets_and_mixes_parse_by_name() {
        let args = parse("--arch tiny-smollm2 --quant q8_0 --out x.gguf").unwrap();
        assert_eq!(args.arch, Some(Preset::TinySmollm2));
        assert_eq!(args.quant, Mix::Q8_0);
        assert!(args.tokenizer.is_none());
        let args = parse("--arch gemma3-4b --tokenizer t.gguf --out x.gguf").unwrap();
        assert_eq!(
            (args.arch, args.quant),
            (Some(Preset::Gemma3_4b), Mix::Q4KM)
        );
        assert!(parse("--arch gemma9 --out x.gguf").is_err());
        assert!(
            parse("--vocab-only --out x.gguf").is_err(),
            "needs --tokenizer"
        );
        assert!(parse("--vocab-only --tokenizer t.gguf --out x.gguf").is_ok());
    }

    /// A tiny preset with its synthetic tokenizer, written by the command as a user runs it.
    #[test]
    fn a_tiny_model_needs_no_tokenizer_file() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("tiny.gguf");
        let line = format!("--arch tiny-llama --quant q8_0 --out {}", out.display());
        run(&parse(&line).unwrap()).unwrap();
        let file = rullama_gguf::GgufFile::open(&out).unwrap();
        assert_eq!(file.metadata().architecture().unwrap(), "llama");
        let bytes = rullama_synth::tiny_model(rullama_synth::Tiny::Llama, 0);
        assert!(
            file.as_bytes() == &bytes[..],
            "the library's tiny model, seed 0"
        );
    }
}
