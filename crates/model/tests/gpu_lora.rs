//! LoRA adapters on the GPU executor (lavapipe in CI), on the tiny synthetic models of each
//! architecture: with two adapters applied, a prompt block (every row's logits) and decode
//! steps stay within `tests/gpu.rs`'s bars of the CPU reference with the same adapters,
//! under the default fusions (stacked q|k|v and gate|up, norms and residuals folded into
//! the products, the GLU epilogue), whose patterns the LoRA products' extra readers of a
//! projection's input must not break; with q8 inputs within the q8 mode's bar. An adapter of
//! scale 0 gives the base's logits bit for bit and the same kernels.
//!
//! No adapter: the tests fail, unless `RULLAMA_NO_GPU_TESTS=1`, which skips them.

mod common;

use std::sync::Arc;

use common::gpu::{Deviation, LOGIT_REL, TOP10_NATS, device, skip, top10_nats};
use common::lora::{adapter_gguf, projections, random_pairs, rounded};
use rullama_gguf::{GgmlType, GgufFile};
use rullama_kernels::{Gpu, Kernel};
use rullama_model::gpu::{GpuOptions, KvDtype};
use rullama_model::{Backend, CpuBackend, GpuBackend, LoraAdapter, Model, OutputRows};
use rullama_synth::{Tiny, tiny_model};

const PROMPT: [u32; 5] = [2, 40, 41, 300, 7];
const STEPS: [u32; 3] = [99, 17, 250];

/// The q8 mode's bar on top-10 log-probs (`tests/gpu_q8.rs`).
const Q8_NATS: f64 = 0.05;

/// Two adapters: every projection at rank 3 (F32), and q, v and down at rank 2 (F16 A,
/// F16 B).
fn adapters(file: &GgufFile<Vec<u8>>, arch: &str) -> [LoraAdapter; 2] {
    let all = projections(file, |_| true);
    let some = projections(file, |n| {
        n.contains("attn_q") || n.contains("attn_v") || n.contains("ffn_down")
    });
    let p1 = random_pairs(file, &all, 3, 2.0, 0.3, 1);
    let p2 = rounded(
        &random_pairs(file, &some, 2, 0.75, 0.3, 2),
        GgmlType::F16,
        GgmlType::F16,
    );
    [
        adapter_gguf(arch, Some(6.0), &p1, GgmlType::F32, GgmlType::F32),
        adapter_gguf(arch, None, &p2, GgmlType::F16, GgmlType::F16),
    ]
    .map(|bytes| LoraAdapter::from_gguf_bytes(bytes, "test.gguf").unwrap())
}

/// Every prompt row's logits, then each decode step's; the kernels of the last decode step.
fn script<B: Backend>(
    model: &Model<B>,
    kernels: impl Fn(&B) -> Vec<Kernel>,
) -> (Vec<Vec<f32>>, Vec<Kernel>) {
    let n_vocab = model.config().n_vocab;
    let mut s = model.session(32).unwrap();
    let prompt = s.forward(&PROMPT, 0, OutputRows::All).unwrap().data;
    let mut rows: Vec<Vec<f32>> = prompt.chunks(n_vocab).map(<[f32]>::to_vec).collect();
    for (i, &t) in STEPS.iter().enumerate() {
        rows.push(
            s.forward(&[t], PROMPT.len() + i, OutputRows::Last)
                .unwrap()
                .data,
        );
    }
    (rows, kernels(model.backend()))
}

fn gpu_model(
    gpu: &Arc<Gpu>,
    file: &GgufFile<Vec<u8>>,
    options: GpuOptions,
    loras: &[(&LoraAdapter, f32)],
) -> Model<GpuBackend> {
    let backend = GpuBackend::shared(Arc::clone(gpu)).with_options(options);
    let mut model = Model::load(file, backend).unwrap();
    model.apply_loras(loras).unwrap();
    model
}

fn gpu_matches_cpu_with_adapters(tiny: Tiny) {
    if skip() {
        return;
    }
    let gpu = device();
    let file = GgufFile::from_bytes(tiny_model(tiny, 5)).unwrap();
    let [a1, a2] = adapters(&file, tiny.arch_name());
    let loras = [(&a1, 0.5), (&a2, 1.5)];
    let mut cpu = Model::load(&file, CpuBackend::new()).unwrap();
    cpu.apply_loras(&loras).unwrap();
    let (want, _) = script(&cpu, |_| Vec::new());
    let base = Model::load(&file, CpuBackend::new()).unwrap();
    let (base_rows, _) = script(&base, |_| Vec::new());

    let kv_f32 = GpuOptions {
        kv_dtype: KvDtype::F32,
        ..GpuOptions::default()
    };
    let last = |b: &GpuBackend| b.last_step_kernels();
    let (got, _) = script(&gpu_model(&gpu, &file, kv_f32, &loras), last);
    let (mut dev, mut moved) = (Deviation::default(), Deviation::default());
    for ((g, w), b) in got.iter().zip(&want).zip(&base_rows) {
        dev.add(g, w);
        moved.add(b, w);
    }
    eprintln!("{tiny:?}: GPU vs CPU with adapters {dev:?}; base vs adapters {moved:?}");
    assert!(dev.logit_rel <= LOGIT_REL, "{tiny:?}: {dev:?}");
    assert!(dev.top10_nats <= TOP10_NATS, "{tiny:?}: {dev:?}");
    assert!(moved.top10_nats > 100.0 * TOP10_NATS, "{tiny:?}: {moved:?}");

    let q8 = GpuOptions {
        q8_inputs: true,
        ..kv_f32
    };
    let (got, _) = script(&gpu_model(&gpu, &file, q8, &loras), last);
    let worst = got
        .iter()
        .zip(&want)
        .map(|(g, w)| top10_nats(w, g))
        .fold(0.0, f64::max);
    eprintln!("{tiny:?}: q8 inputs, worst top-10 {worst:.2e} nats");
    assert!(worst <= Q8_NATS, "{tiny:?}: q8 inputs {worst} nats");

    // Scale 0: the base's graph, kernels and bits.
    let (base_gpu, base_kernels) = script(&gpu_model(&gpu, &file, kv_f32, &[]), last);
    let (zero, zero_kernels) = script(&gpu_model(&gpu, &file, kv_f32, &[(&a1, 0.0)]), last);
    assert_eq!(zero, base_gpu, "{tiny:?}: scale 0");
    assert_eq!(zero_kernels, base_kernels, "{tiny:?}: scale 0 kernels");
}

#[test]
fn gemma3_gpu_matches_cpu_with_adapters() {
    gpu_matches_cpu_with_adapters(Tiny::Gemma3);
}

#[test]
fn llama_gpu_matches_cpu_with_adapters() {
    gpu_matches_cpu_with_adapters(Tiny::Llama);
}

#[test]
fn qwen2_gpu_matches_cpu_with_adapters() {
    gpu_matches_cpu_with_adapters(Tiny::Qwen2);
}

/// What adapters on all seven projections cost a decode step, per layer: four `A` products
/// (q|k|v stacked, as they read one input, then o, gate|up stacked, down) and seven `B`
/// products, each adding its update to its projection's output as it stores it (the
/// bias epilogue reading it: no separate add); the GLU, which the gate|up matvec can no longer store
/// (gate and up are read by their updates' adds), one dispatch of its own; with Gemma's
/// post-norms, the o and down updates' adds a residual op each.
#[test]
fn lora_decode_dispatches() {
    if skip() {
        return;
    }
    let gpu = device();
    for tiny in [Tiny::Gemma3, Tiny::Llama, Tiny::Qwen2] {
        let file = GgufFile::from_bytes(tiny_model(tiny, 5)).unwrap();
        let [a1, a2] = adapters(&file, tiny.arch_name());
        let last = |b: &GpuBackend| b.last_step_kernels();
        let options = GpuOptions::default();
        let (_, base) = script(&gpu_model(&gpu, &file, options, &[]), last);
        let model = gpu_model(&gpu, &file, options, &[(&a1, 0.5), (&a2, 1.5)]);
        let n_layer = model.config().n_layer;
        let (_, lora) = script(&model, last);
        let count = |ks: &[Kernel], f: &dyn Fn(&str) -> bool| {
            ks.iter().filter(|k| f(&format!("{k:?}"))).count()
        };
        // Products that store their value, and those that add it as they store it.
        let plain = count(&lora, &|k| {
            k.starts_with("Matvec(Plain(F32, Epilogue { bias: false")
        });
        let adding = count(&lora, &|k| {
            k.starts_with("Matvec(Plain(F32, Epilogue { bias: true")
        });
        let adds = |ks: &[Kernel]| count(ks, &|k| k == "Elementwise(Add)");
        let post_norms = if tiny == Tiny::Gemma3 { 2 } else { 0 };
        eprintln!(
            "{tiny:?}: decode {} dispatches, {} with adapters",
            base.len(),
            lora.len()
        );
        // The `B` products whose adds are residual ops store their value.
        let want = ((4 + post_norms) * n_layer, (7 - post_norms) * n_layer);
        assert_eq!((plain, adding), want, "{tiny:?}: {lora:?}");
        assert_eq!(adds(&lora), adds(&base), "{tiny:?}: {lora:?}");
        assert_eq!(
            lora.len(),
            base.len() + n_layer * (4 + 7 + 1 + post_norms),
            "{tiny:?}: {lora:?}"
        );
    }
}

/// The real SmolLM2-135M (Q4_1 projections, Q8_0 embedding; stacked and widened as the
/// GPU executor uploads them) with a random rank-8 adapter on every projection: the GPU
/// within the f32 bars of the CPU reference with the same adapter, and the adapter moving
/// the logits far past them.
#[test]
fn smollm2_gpu_matches_cpu_with_an_adapter() {
    if skip() {
        return;
    }
    let bytes = std::fs::read(common::cached("smollm2-135m")).unwrap();
    let file = GgufFile::from_bytes(bytes).unwrap();
    let all = projections(&file, |_| true);
    let pairs = random_pairs(&file, &all, 8, 2.0, 0.1, 3);
    let gguf = adapter_gguf("llama", Some(16.0), &pairs, GgmlType::F16, GgmlType::F16);
    let adapter = LoraAdapter::from_gguf_bytes(gguf, "smollm2-lora.gguf").unwrap();
    let mut cpu = Model::load(&file, CpuBackend::new()).unwrap();
    let (base, _) = script(&cpu, |_| Vec::new());
    cpu.apply_loras(&[(&adapter, 1.0)]).unwrap();
    let (want, _) = script(&cpu, |_| Vec::new());
    let options = GpuOptions {
        kv_dtype: KvDtype::F32,
        ..GpuOptions::default()
    };
    let gpu = gpu_model(&device(), &file, options, &[(&adapter, 1.0)]);
    let (got, _) = script(&gpu, |_| Vec::new());
    let (mut dev, mut moved) = (Deviation::default(), Deviation::default());
    for ((g, w), b) in got.iter().zip(&want).zip(&base) {
        dev.add(g, w);
        moved.add(b, w);
    }
    eprintln!("smollm2: GPU vs CPU with an adapter {dev:?}; base vs adapter {moved:?}");
    assert!(
        dev.logit_rel <= LOGIT_REL && dev.top10_nats <= TOP10_NATS,
        "{dev:?}"
    );
    assert!(moved.top10_nats > 100.0 * TOP10_NATS, "{moved:?}");
}
