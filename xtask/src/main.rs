//! Project automation, run as `cargo xtask <command>` (alias in `.cargo/config.toml`).

mod models;
mod parity;
mod python_ref;
mod spirv;
mod synth;
mod test;
mod variants;
mod wgsl;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "cargo xtask", about = "rullama project automation")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Fetch, join, verify and cache the real test models listed in data/models.toml.
    Models {
        /// Fetch only these models (short names); all when omitted.
        names: Vec<String>,
    },
    /// Check kernels and formats against their references; prints a table, fails on any miss.
    Parity(parity::Args),
    /// Parse and validate every shader with naga; check its bindings against the Rust side.
    Wgsl,
    /// Write a GGUF with a real or tiny model's shapes, random weights, and a real or
    /// synthetic tokenizer.
    Synth(synth::Args),
    /// The whole test suite, as CI runs it: Python reference deps, models, fmt, clippy, tests.
    Test {
        /// Skip `cargo fmt --check` and clippy (faster local runs).
        #[arg(long)]
        no_lint: bool,
    },
}

/// The repository root: xtask lives one level below it. A release xtask copied to another
/// machine (the GPU host) finds its build path gone; there the checkout it runs in is the
/// root, recognised by `data/oracle`.
fn repo_root() -> PathBuf {
    let manifest_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let built_in = manifest_dir
        .parent()
        .map(PathBuf::from)
        .unwrap_or(manifest_dir);
    if built_in.join("data/oracle").is_dir() {
        return built_in;
    }
    match std::env::current_dir() {
        Ok(cwd) if cwd.join("data/oracle").is_dir() => cwd,
        _ => built_in,
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let root = repo_root();
    let result = match cli.command {
        Command::Models { names } => models::run(&root, &names),
        Command::Parity(args) => parity::run(&root, &args),
        Command::Wgsl => wgsl::run(&root),
        Command::Synth(args) => synth::run(&args),
        Command::Test { no_lint } => test::run(&root, !no_lint),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::FAILURE
        }
    }
}
