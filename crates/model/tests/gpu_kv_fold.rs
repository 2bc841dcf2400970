//! The K/V append folded into the q/k norm + RoPE op (`GpuOptions::fold_kv_append`) on the
//! real models (lavapipe in CI), one per rope path: gemma-3-270m (per-head q/k norms, NeoX),
//! smollm2-135m (Llama: RoPE alone, adjacent pairs), qwen2.5-0.5b (RoPE alone after the q/k/v
//! biases, NeoX); f32 and f16 caches. Every layer's `kv_append` is gone from decode and
//! prefill steps, and the logits equal the separate append's bit for bit. Prints the
//! dispatches of a decode step either way.
//!
//! No adapter: the tests fail, unless `RULLAMA_NO_GPU_TESTS=1`, which skips them.

use std::sync::Arc;

use rullama_gguf::GgufFile;
use rullama_kernels::{Gpu, Kernel};
use rullama_model::gpu::{GpuOptions, KvDtype};
use rullama_model::{GpuBackend, Model, OutputRows};

fn skip() -> bool {
    let skip = std::env::var_os("RULLAMA_NO_GPU_TESTS").is_some();
    if skip {
        eprintln!("RULLAMA_NO_GPU_TESTS is set: GPU backend tests skipped");
    }
    skip
}

/// The kernels of a prefill of 3 tokens and of the second of 2 decode steps after it, and
/// the logits of all of them.
struct Run {
    n_layer: usize,
    prefill: Vec<Kernel>,
    decode: Vec<Kernel>,
    logits: Vec<f32>,
}

fn run(gpu: &Arc<Gpu>, file: &GgufFile, kv_dtype: KvDtype, fold_kv_append: bool) -> Run {
    let backend = GpuBackend::shared(Arc::clone(gpu)).with_options(GpuOptions {
        kv_dtype,
        fold_kv_append,
        ..GpuOptions::default()
    });
    let mut model = Model::load(file, backend).unwrap();
    // 600 positions: decode attention in splits, as `tests/gpu.rs` runs it.
    let mut cache = model.new_cache(600).unwrap();
    let mut logits = model
        .forward(&mut cache, &[2, 1000, 3000], 0, OutputRows::All)
        .unwrap()
        .data;
    let prefill = model.backend_mut().last_step_kernels();
    let mut decode = Vec::new();
    for (t, id) in [(3, 4000), (4, 17)] {
        let l = model
            .forward(&mut cache, &[id], t, OutputRows::Last)
            .unwrap();
        logits.extend_from_slice(&l.data);
        decode = model.backend_mut().last_step_kernels();
    }
    Run {
        n_layer: model.config().n_layer,
        prefill,
        decode,
        logits,
    }
}

fn count(kernels: &[Kernel], f: impl Fn(&Kernel) -> bool) -> usize {
    kernels.iter().filter(|k| f(k)).count()
}

fn folds_kv_append(name: &str) {
    if skip() {
        return;
    }
    let path = rullama_gguf::store::cached_test_model(name)
        .unwrap_or_else(|| panic!("test model {name} is not cached: run `cargo xtask models`"));
    let file = GgufFile::open(&path).unwrap();
    let gpu = Arc::new(Gpu::open().expect("a GPU adapter (lavapipe will do)"));
    for dtype in [KvDtype::F32, KvDtype::F16] {
        let folded = run(&gpu, &file, dtype, true);
        let apart = run(&gpu, &file, dtype, false);
        let n_layer = folded.n_layer;
        let appends = |k: &Kernel| matches!(k, Kernel::KvAppend(_));
        let rope_kv =
            |k: &Kernel| matches!(k, Kernel::HeadNormRope { kv: Some(d), .. } if *d == dtype);
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
        let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
        assert!(
            bits(&folded.logits) == bits(&apart.logits),
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
