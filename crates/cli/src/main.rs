//! `rullama`: run and inspect GGUF models from the command line.

mod commands;
mod units;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Run large language models from GGUF files (and Ollama's store) on any GPU.
#[derive(Parser)]
// The about text is this doc comment (not the package description, which lists commands
// still to come).
#[command(name = "rullama", version, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Generate text from a prompt and stream it to stdout (`--chat` for a reply).
    Run(commands::run::Args),
    /// Talk with a model: each line you type is a user turn (/? lists the commands; /bye or
    /// Ctrl-D ends, Ctrl-C stops a reply).
    Chat(commands::chat::Args),
    /// Score a text file as llama-perplexity does: chunks of --ctx tokens, second halves scored.
    Perplexity(commands::perplexity::Args),
    /// Measure prefill and decode speed as llama-bench does (`ppN`, `tgN`, `ppN @ dD`;
    /// TFLOP/s; device memory).
    ///
    /// Prefill `ppN`: N random prompt token ids (fixed by --seed) in one block, the next token
    /// drawn from the last row. Decode `tgN`: N steps of one token in, one sampled id out
    /// (llama.cpp's default sampling; on the GPU executor it runs on the GPU and only the id
    /// comes back). -p, -n and -d take comma-separated lists: every size is its own test, run
    /// at every depth -d (D positions of history prefilled untimed, `pp512 @ d4096`). Each
    /// test runs -r times after an untimed warm-up of at least a second (an idle GPU's clock
    /// ramps up under load); t/s is the median with min and max; a
    /// prefill's TFLOP/s counts its matrix products and attention. Then the device memory the
    /// executor holds: weights, KV cache, built steps. Progress goes to stderr; the table (or
    /// `--json`) to stdout.
    Bench(commands::bench::Args),
    /// Describe a model file: architecture, hyper-parameters, tokenizer, tensors; with
    /// `--gpu`, the device memory the GPU executor holds for it.
    Inspect(commands::inspect::Args),
    /// Convert a GGUF model to one of llama-quantize's file types (Q4_K_M, Q8_0, ...): each
    /// tensor's type chosen as llama-quantize chooses it, every metadata key kept.
    Quantize(commands::quantize::Args),
    /// Turn text into token ids exactly as llama.cpp does (ids and pieces; `--json`).
    Tokenize(commands::tokenize::Args),
    /// Train a LoRA adapter on JSONL data and write it as llama.cpp's LoRA GGUF (progress
    /// bar, a JSON line a step in OUT.log.jsonl, the loss curve as OUT.loss.png,
    /// checkpoints that --resume continues).
    /// Training runs on the CPU, in f64.
    Finetune(commands::finetune::Args),
    /// Merge LoRA adapters into a model's weights and write a GGUF in the model's formats
    /// (each updated projection dequantized, updated and quantized back).
    Merge(commands::merge::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run(args) => commands::run::run(&args),
        Command::Chat(args) => commands::chat::run(&args),
        Command::Perplexity(args) => commands::perplexity::run(&args),
        Command::Bench(args) => commands::bench::run(&args),
        Command::Inspect(args) => commands::inspect::run(&args),
        Command::Quantize(args) => commands::quantize::run(&args),
        Command::Tokenize(args) => commands::tokenize::run(&args),
        Command::Merge(args) => commands::merge::run(&args),
        Command::Finetune(args) => commands::finetune::run(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(commands::CliError::Interrupted) => ExitCode::from(commands::chat::INTERRUPTED_STATUS),
        // Whoever reads stdout stopped (`| head`): nothing is wrong, and nothing is left to do.
        Err(commands::CliError::Output(e)) if e.kind() == std::io::ErrorKind::BrokenPipe => {
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("error: {err}");
            ExitCode::FAILURE
        }
    }
}
