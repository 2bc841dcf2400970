//! `cargo xtask parity`: check our arithmetic against its references and print a table.
//!
//! Suites: `--formats` (every tensor of every real model dequantized by rullama-quant equals
//! the `gguf` Python package's output bit for bit) and `--kernels` (every GPU kernel against
//! its CPU reference on the adapter `RULLAMA_ADAPTER` picks). With no suite named, all run.

mod formats;
mod kernels;

use std::path::Path;

#[derive(clap::Args, Default)]
pub struct Args {
    /// Dequantize every tensor of the real models and compare with the Python reference.
    #[arg(long)]
    formats: bool,
    /// Every GPU kernel against its CPU reference (`RULLAMA_PARITY_CASES`, default 40).
    #[arg(long)]
    kernels: bool,
}

pub fn run(root: &Path, args: &Args) -> Result<(), String> {
    let all = !args.formats && !args.kernels;
    let mut failures = 0;
    if all || args.kernels {
        failures += kernels::run()?;
    }
    if all || args.formats {
        failures += formats::run(root)?;
    }
    if failures == 0 {
        Ok(())
    } else {
        Err(format!("{failures} parity check(s) failed"))
    }
}
