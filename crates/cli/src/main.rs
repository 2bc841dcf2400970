//! `rullama`: run and inspect GGUF models from the command line.

mod commands;
mod units;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Run large language models from GGUF files (and Ollama's store) on any GPU.
#[derive(Parser)]
#[command(name = "rullama", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Generate text from a prompt and stream it to stdout (`--chat` for a reply).
    Run(commands::run::Args),
    /// Talk with a model: each line you type is a user turn (/bye or Ctrl-D ends).
    Chat(commands::chat::Args),
    /// Score a text file as llama-perplexity does: chunks of --ctx tokens, second halves scored.
    Perplexity(commands::perplexity::Args),
    /// Describe a model file: architecture, hyper-parameters, tokenizer, tensors.
    Inspect(commands::inspect::Args),
    /// Turn text into token ids exactly as llama.cpp does (ids and pieces; `--json`).
    Tokenize(commands::tokenize::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run(args) => commands::run::run(&args),
        Command::Chat(args) => commands::chat::run(&args),
        Command::Perplexity(args) => commands::perplexity::run(&args),
        Command::Inspect(args) => commands::inspect::run(&args),
        Command::Tokenize(args) => commands::tokenize::run(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err}");
            ExitCode::FAILURE
        }
    }
}
