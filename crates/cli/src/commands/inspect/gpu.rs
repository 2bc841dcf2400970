//! `rullama inspect --gpu`: the model loaded on the GPU executor, and the device memory it
//! holds by role once a KV cache of `--ctx` positions exists and one decode step (the step
//! every generated token replays) is built.

use std::io::Write;
use std::path::Path;
use std::time::Instant;

use rullama_kernels::Gpu;
use rullama_model::sampler::{Sampler, SamplerParams};
use rullama_model::{GpuBackend, Model};
use serde::Serialize;

use crate::commands::CliError;
use crate::units;

/// The GPU executor's device memory for one model, as `GpuBackend::memory` counts it (the
/// buffers it creates; not what wgpu and the driver allocate besides).
#[derive(Serialize)]
pub struct GpuMemory {
    pub adapter: String,
    /// KV cache positions.
    pub ctx: usize,
    pub load_ms: f64,
    pub weights_bytes: u64,
    pub kv_cache_bytes: u64,
    /// The built decode step (activations, uniforms, staging, sampling scratch) and the
    /// RoPE tables.
    pub scratch_bytes: u64,
    pub total_bytes: u64,
}

/// Load the model at `path` on the GPU, make a cache of `ctx` positions and run one decode
/// step as `rullama run` does (llama.cpp's default sampler), then count.
pub fn measure(path: &Path, ctx: usize) -> Result<GpuMemory, CliError> {
    let gpu = Gpu::open()?;
    let adapter = gpu.info.name.clone();
    let start = Instant::now();
    let model = Model::open(path, GpuBackend::new(gpu))?;
    let load_ms = start.elapsed().as_secs_f64() * 1e3;
    let mut session = model.session(ctx)?;
    let mut sampler = Sampler::new(SamplerParams::default());
    session.forward_sample(&[0], 0, &mut sampler)?;
    let mem = session.model().backend().memory();
    Ok(GpuMemory {
        adapter,
        ctx,
        load_ms,
        weights_bytes: mem.weights,
        kv_cache_bytes: mem.kv_cache,
        scratch_bytes: mem.scratch,
        total_bytes: mem.total(),
    })
}

pub fn print_text(out: &mut impl Write, m: &GpuMemory) -> std::io::Result<()> {
    writeln!(
        out,
        "\ndevice memory (gpu: {}, loaded in {:.0} ms)",
        m.adapter, m.load_ms
    )?;
    let kv = format!("KV cache ({} positions)", m.ctx);
    for (what, n) in [
        ("weights", m.weights_bytes),
        (kv.as_str(), m.kv_cache_bytes),
        ("scratch (decode step)", m.scratch_bytes),
        ("total", m.total_bytes),
    ] {
        writeln!(out, "  {what:<28} {:>12} ({n})", units::bytes(n))?;
    }
    Ok(())
}
