//! The GLU epilogue of the gate|up matvec (`GpuOptions::glu_epilogue`) on the real models
//! (lavapipe in CI): in a decode step every layer's stacked gate|up matvec stores
//! `act(gate) * up` and its down projection is a plain matvec, so no `glu` dispatch is left
//! and no down projection reads the GLU as its input (`matvec_glu`); a prompt block is
//! lowered as before. These models' down projections are all under 4 MB, so without the
//! epilogue each reads the GLU as its input (`matvec_glu`) and the dispatch count is the
//! same either way; `tests/gpu_fused.rs` has the wider FFN that saves the `glu` dispatch.
//! The logits are not the same bit for bit: `matvec_glu` computes `act(gate) * up` in
//! registers, where the compiler may fuse the product into the next add (Q4_1's and
//! Q4_K's sums of x for their mins) instead of rounding it to f32 first, so they agree to
//! rounding (1e-5 of the largest logit; lavapipe: 3e-7 to 9e-7). With q8 inputs the count
//! is the same too: the GLU a small down projection reads stays f32, as `matvec_glu`'s
//! input did. Prints the dispatches of a decode step either way.
//!
//! No adapter: the tests fail, unless `RULLAMA_NO_GPU_TESTS=1`, which skips them.

mod common;

use common::gpu::{Script, count, device, file, run, skip};
use rullama_kernels::Kernel;
use rullama_kernels::ops::matvec::{InputKind, MatvecKernel};
use rullama_model::OutputRows;
use rullama_model::gpu::{GpuOptions, KvDtype};

/// A prefill of 3 tokens, then 2 decode steps; 600 positions: decode attention in splits, as
/// `tests/gpu.rs` runs it.
const SCRIPT: Script<'static> = Script {
    ctx: 600,
    prompt: &[2, 1000, 3000],
    prompt_rows: OutputRows::All,
    steps: &[4000, 17],
};

fn stores_the_glu(name: &str) {
    if skip() {
        return;
    }
    let file = file(name);
    let gpu = device();
    let run_with = |glu_epilogue, q8_inputs| {
        // Without the residual epilogue (`residual_rows`), which needs a plain down
        // projection for the op after it: one the GLU epilogue leaves and `matvec_glu` not.
        let options = GpuOptions {
            kv_dtype: KvDtype::F32,
            glu_epilogue,
            q8_inputs,
            residual_rows: false,
            ..GpuOptions::default()
        };
        run(&gpu, &file, options, &SCRIPT)
    };
    let (on, off) = (run_with(true, false), run_with(false, false));
    let n_layer = on.n_layer;
    let glu_out = |input| move |k: &Kernel| matches!(k, Kernel::Matvec(MatvecKernel::GluOut(_, i, _)) if *i == input);
    let separate = |k: &Kernel| matches!(k, Kernel::Glu(_));
    let glu_input = |k: &Kernel| matches!(k, Kernel::Matvec(MatvecKernel::Glu(..)));
    let decode = &on.decode;
    // Its input a vector, or computed from the residual op before it (`GpuOptions::fold_norm`;
    // Gemma's with its post-norm).
    let f32_glu_out = |k: &Kernel| {
        matches!(
            k,
            Kernel::Matvec(MatvecKernel::GluOut(
                _,
                InputKind::Plain | InputKind::Norm(_),
                _
            ))
        )
    };
    assert_eq!(count(decode, f32_glu_out), n_layer, "{name}: {decode:?}");
    assert_eq!(count(decode, separate), 0, "{name}: {decode:?}");
    assert_eq!(count(decode, glu_input), 0, "{name}: {decode:?}");
    // Without the epilogue each layer's GLU is a dispatch of its own (down projections over
    // 4 MB) or read by its down projection: one dispatch fewer a layer for the former.
    let (glus, folded) = (count(&off.decode, separate), count(&off.decode, glu_input));
    assert_eq!(glus + folded, n_layer, "{name}: {:?}", off.decode);
    assert_eq!(off.decode.len() - on.decode.len(), glus, "{name}");
    // A prompt block is lowered as before.
    assert_eq!(on.prefill, off.prefill, "{name}");
    let (mut diff, mut scale) = (0f32, 0f32);
    for (a, b) in on.logits.iter().flatten().zip(off.logits.iter().flatten()) {
        diff = diff.max((a - b).abs());
        scale = scale.max(b.abs());
    }
    assert!(
        diff <= 1e-5 * scale,
        "{name}: max |dlogit| {diff:e} against max |logit| {scale:e}"
    );

    // With q8 inputs the gate|up matvec reads the q8 copy its input's residual_norm makes;
    // the (small) down projection reads the GLU in f32.
    let (q8_on, q8_off) = (run_with(true, true), run_with(false, true));
    let q8_decode = &q8_on.decode;
    assert_eq!(
        count(q8_decode, glu_out(InputKind::Q8)),
        n_layer,
        "{name}: {q8_decode:?}"
    );
    assert_eq!(q8_on.decode.len(), q8_off.decode.len(), "{name}");
    eprintln!(
        "{name} ({n_layer} layers): decode {} -> {} dispatches ({glus} glu, {folded} matvec_glu \
         without the epilogue); with q8 inputs {} -> {}; prefill {}; max |dlogit| {diff:e} of \
         max |logit| {scale:e}",
        off.decode.len(),
        on.decode.len(),
        q8_off.decode.len(),
        q8_on.decode.len(),
        on.prefill.len(),
    );
}

#[test]
fn gemma3_stores_the_glu() {
    stores_the_glu("gemma3-270m");
}

#[test]
fn smollm2_stores_the_glu() {
    stores_the_glu("smollm2-135m");
}

#[test]
fn qwen2_stores_the_glu() {
    stores_the_glu("qwen2.5-0.5b");
}
