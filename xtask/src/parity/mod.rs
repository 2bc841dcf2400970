//! `cargo xtask parity`: check our arithmetic against its references and print a table.
//!
//! Suites: `--formats` (every tensor of every real model dequantized by rullama-quant equals
//! the `gguf` Python package's output bit for bit). With no suite named, all of them run.

mod formats;

use std::path::Path;

#[derive(clap::Args, Default)]
pub struct Args {
    /// Dequantize every tensor of the real models and compare with the Python reference.
    #[arg(long)]
    formats: bool,
}

pub fn run(root: &Path, args: &Args) -> Result<(), String> {
    let all = !args.formats;
    let mut failures = 0;
    if all || args.formats {
        failures += formats::run(root)?;
    }
    if failures == 0 {
        Ok(())
    } else {
        Err(format!("{failures} parity check(s) failed"))
    }
}
