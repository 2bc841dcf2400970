//! `cargo xtask parity`: check our arithmetic against its references and print a table.
//!
//! Suites: `--formats` (every tensor of every real model dequantized by rullama-quant equals
//! the `gguf` Python package's output bit for bit; the package is installed first where it is
//! missing, as `cargo xtask test` does) and `--kernels` (every GPU kernel against
//! its CPU reference on the adapter `RULLAMA_ADAPTER` picks). With no suite named, both run.
//!
//! `--models` (the real models against the exact-f32 oracle: greedy text, log-probs,
//! perplexity) takes minutes per model on a small CPU, so it runs only when named.

mod formats;
mod kernels;
mod models;
mod oracle;

use std::path::Path;

#[derive(clap::Args, Default)]
pub struct Args {
    /// Dequantize every tensor of the real models and compare with the Python reference.
    #[arg(long)]
    formats: bool,
    /// Every GPU kernel against its CPU reference (`RULLAMA_PARITY_CASES`, default 40).
    #[arg(long)]
    kernels: bool,
    /// The real models against the exact-f32 oracle in data/oracle (the long run: minutes).
    #[arg(long)]
    models: bool,
    /// With --models: only this model (short name, e.g. smollm2-135m).
    #[arg(long, requires = "models")]
    model: Option<String>,
    /// With --models: the executor that runs the models.
    #[arg(long, value_enum, default_value_t, requires = "models")]
    backend: models::BackendChoice,
    /// With --models: the GPU executor's mode. f32: f32 KV cache, no tensor cores, the exact
    /// bars; f16, the default of `rullama run` (f16 KV cache, tensor-core prompt matmuls where
    /// the GPU has them): the default mode's bars, 0.05 nats and 0.5%.
    #[arg(long, value_enum, default_value_t, requires = "models")]
    cache_type: models::CacheType,
    /// With --models: decode matvecs read int8-rounded inputs (`rullama run --q8-inputs`),
    /// held to the default mode's bars whatever the cache type.
    #[arg(long, requires = "models")]
    q8_inputs: bool,
    /// With --models: chunks of the perplexity text to score (the oracle's figure is for 40).
    #[arg(long, default_value_t = 40, requires = "models")]
    chunks: usize,
}

pub fn run(root: &Path, args: &Args) -> Result<(), String> {
    // `--models` alone runs only the models; the default stays what CI can afford.
    let all = !args.formats && !args.kernels && !args.models;
    let mut failures = 0;
    if all || args.kernels {
        failures += kernels::run()?;
    }
    if all || args.formats {
        crate::python_ref::ensure_installed()?;
        failures += formats::run(root)?;
    }
    if args.models {
        let opts = models::Options {
            model: args.model.clone(),
            backend: args.backend,
            cache: args.cache_type,
            q8_inputs: args.q8_inputs,
            chunks: args.chunks,
        };
        failures += models::run(root, &opts)?;
    }
    if failures == 0 {
        Ok(())
    } else {
        Err(format!("{failures} parity check(s) failed"))
    }
}
