//! Gemma's embedding scale (sqrt(d_model)) folded into the gather (`fuse.rs`,
//! `Fuse::ScaledEmbed`) on the real gemma-3-270m (lavapipe in CI): neither a prefill nor a
//! decode step has a `unary` dispatch left, only the gather (one dispatch per table chunk:
//! two on lavapipe, whose bindings hold 128 MiB). The values are the separate
//! op's (one f32 multiply of the gathered value either way); `tests/gpu.rs` holds the logits
//! to the CPU executor's.
//!
//! No adapter: the tests fail, unless `RULLAMA_NO_GPU_TESTS=1`, which skips them.

mod common;

use common::gpu::{Script, count, device, file, run, skip};
use rullama_kernels::Kernel;
use rullama_model::OutputRows;
use rullama_model::gpu::GpuOptions;

const SCRIPT: Script<'static> = Script {
    ctx: 64,
    prompt: &[2, 1000, 3000],
    prompt_rows: OutputRows::Last,
    steps: &[4000],
};

#[test]
fn gemma3_scales_embeddings_in_the_gather() {
    if skip() {
        return;
    }
    let run = run(
        &device(),
        &file("gemma3-270m"),
        GpuOptions::default(),
        &SCRIPT,
    );
    let unary = |k: &Kernel| matches!(k, Kernel::Unary(_));
    let gather = |k: &Kernel| matches!(k, Kernel::EmbedRows(_));
    for (what, kernels) in [("prefill", &run.prefill), ("decode", &run.decode)] {
        assert_eq!(count(kernels, unary), 0, "{what}: {kernels:?}");
        assert!(count(kernels, gather) > 0, "{what}: {kernels:?}");
    }
}
