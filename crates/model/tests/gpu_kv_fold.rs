//! The K/V append folded into the q/k norm + RoPE op (`GpuOptions::fold_kv_append`) on the
//! real models (lavapipe in CI), one per rope path: gemma-3-270m (per-head q/k norms, NeoX),
//! smollm2-135m (Llama: RoPE alone, adjacent pairs), qwen2.5-0.5b (RoPE alone after the q/k/v
//! biases, NeoX); f32 and f16 caches. Every layer's `kv_append` is gone from decode and
//! prefill steps, and the logits equal the separate append's bit for bit. Prints the
//! dispatches of a decode step either way (with the rope op kept out of the decode
//! attention, `fold_rope_attention: Off`, so that decode has a rope op to fold into).
//!
//! Then the next fold (`GpuOptions::fold_rope_attention`, every op: `All`, the default): in
//! decode that rope op (q/k norm, RoPE, K/V store) goes into the attention
//! (`attention_rope`): one dispatch fewer a layer, prefill unchanged, the logits equal the
//! unfolded path's bit for bit (lavapipe) without q/k norms. With them (gemma-3-270m) the
//! folded attention sums each head's squares in its lanes' order, not head_norm_rope's tree,
//! so its logits agree with the unfolded path's within the bars `tests/gpu.rs` sets for two
//! f32 paths over the same weights (`LOGIT_REL`, `TOP10_NATS`), and pick the same tokens.
//!
//! No adapter: the tests fail, unless `RULLAMA_NO_GPU_TESTS=1`, which skips them.

mod common;

use common::gpu::{Deviation, LOGIT_REL, Script, TOP10_NATS, count, device, file, run, skip};
use rullama_kernels::Kernel;
use rullama_kernels::ops::attention_rope::AttentionRopeKernel;
use rullama_kernels::ops::head_norm_rope::HeadNormRopeKernel;
use rullama_model::OutputRows;
use rullama_model::gpu::{GpuOptions, KvDtype, RopeAttention};
use rullama_model::logits::argmax;

/// A prefill of 3 tokens, then 2 decode steps; 600 positions: decode attention in splits, as
/// `tests/gpu.rs` runs it.
const SCRIPT: Script<'static> = Script {
    ctx: 600,
    prompt: &[2, 1000, 3000],
    prompt_rows: OutputRows::All,
    steps: &[4000, 17],
};

fn folds_kv_append(name: &str) {
    if skip() {
        return;
    }
    let file = file(name);
    let gpu = device();
    for dtype in [KvDtype::F32, KvDtype::F16] {
        let run_with = |fold_kv_append| {
            let options = GpuOptions {
                kv_dtype: dtype,
                fold_kv_append,
                fold_rope_attention: RopeAttention::Off,
                ..GpuOptions::default()
            };
            run(&gpu, &file, options, &SCRIPT)
        };
        let (folded, apart) = (run_with(true), run_with(false));
        let n_layer = folded.n_layer;
        let appends = |k: &Kernel| matches!(k, Kernel::KvAppend(_));
        let rope_kv = |k: &Kernel| matches!(k, Kernel::HeadNormRope(HeadNormRopeKernel { kv: Some(d), .. }) if *d == dtype);
        for (what, folded, apart) in [
            ("prefill", &folded.prefill, &apart.prefill),
            ("decode", &folded.decode, &apart.decode),
        ] {
            assert_eq!(count(folded, appends), 0, "{name} {what}: {folded:?}");
            assert_eq!(count(folded, rope_kv), n_layer, "{name} {what}: {folded:?}");
            assert_eq!(count(apart, appends), n_layer, "{name} {what}: {apart:?}");
            assert_eq!(apart.len() - folded.len(), n_layer, "{name} {what}");
        }
        eprintln!(
            "{name} ({dtype:?} cache, {n_layer} layers): decode {} -> {} dispatches, prefill {} \
             -> {}",
            apart.decode.len(),
            folded.decode.len(),
            apart.prefill.len(),
            folded.prefill.len(),
        );
        assert!(
            folded.bits() == apart.bits(),
            "{name} ({dtype:?} cache): the folded append's logits differ from the separate one's"
        );
    }
}

#[test]
fn gemma3_folds_kv_append() {
    folds_kv_append("gemma3-270m");
}

#[test]
fn smollm2_folds_kv_append() {
    folds_kv_append("smollm2-135m");
}

#[test]
fn qwen2_folds_kv_append() {
    folds_kv_append("qwen2.5-0.5b");
}

fn folds_rope_into_attention(name: &str) {
    if skip() {
        return;
    }
    let file = file(name);
    let gpu = device();
    for dtype in [KvDtype::F32, KvDtype::F16] {
        let run_with = |fold_rope_attention| {
            let options = GpuOptions {
                kv_dtype: dtype,
                fold_rope_attention,
                ..GpuOptions::default()
            };
            run(&gpu, &file, options, &SCRIPT)
        };
        let (folded, apart) = (run_with(RopeAttention::All), run_with(RopeAttention::Off));
        let n_layer = folded.n_layer;
        let rope = |k: &Kernel| matches!(k, Kernel::HeadNormRope(_));
        let rope_attention = |k: &Kernel| matches!(k, Kernel::AttentionRope(AttentionRopeKernel { kv, .. }) if *kv == dtype);
        let (f, a) = (&folded.decode, &apart.decode);
        assert_eq!(count(f, rope), 0, "{name} decode: {f:?}");
        assert_eq!(count(f, rope_attention), n_layer, "{name} decode: {f:?}");
        assert_eq!(count(a, rope), n_layer, "{name} decode: {a:?}");
        assert_eq!(count(a, rope_attention), 0, "{name} decode: {a:?}");
        assert_eq!(a.len() - f.len(), n_layer, "{name} decode");
        // A prompt block keeps the rope op.
        assert_eq!(folded.prefill, apart.prefill, "{name} prefill");
        eprintln!(
            "{name} ({dtype:?} cache, {n_layer} layers): decode {} -> {} dispatches with the \
             rope op in the attention",
            a.len(),
            f.len(),
        );
        let normed = folded.decode.iter().any(|k| {
            matches!(
                k,
                Kernel::AttentionRope(AttentionRopeKernel { norm: true, .. })
            )
        });
        if normed {
            let mut d = Deviation::default();
            for (got, want) in folded.logits.iter().zip(&apart.logits) {
                d.add(got, want);
                assert_eq!(argmax(got), argmax(want), "{name} ({dtype:?} cache)");
            }
            eprintln!("{name} ({dtype:?} cache): folded against apart {d:?}");
            assert!(
                d.logit_rel <= LOGIT_REL && d.top10_nats <= TOP10_NATS,
                "{d:?}"
            );
        } else {
            assert!(
                folded.bits() == apart.bits(),
                "{name} ({dtype:?} cache): the folded rope's logits differ from the rope op's"
            );
        }
        // The default folds every one.
        let default = run_with(GpuOptions::default().fold_rope_attention);
        assert_eq!(default.decode, folded.decode, "{name} default decode");
    }
}

#[test]
fn gemma3_folds_rope_into_attention() {
    folds_rope_into_attention("gemma3-270m");
}

#[test]
fn smollm2_folds_rope_into_attention() {
    folds_rope_into_attention("smollm2-135m");
}

#[test]
fn qwen2_folds_rope_into_attention() {
    folds_rope_into_attention("qwen2.5-0.5b");
}
