//! The GPU engine against the CPU tape (f64, itself checked against finite differences in
//! `gradients.rs`), on the tiny random model of each architecture with every projection
//! adapted (lavapipe in CI): a step of two examples packed into one GPU step gives the same
//! loss and LoRA gradients to f32 rounding, and five AdamW steps the same losses.
//!
//! No adapter: the tests fail, unless `RULLAMA_NO_GPU_TESTS=1`, which skips them.

use std::sync::Arc;

use rullama_finetune::engine::{Engine, MaskedTokens, TrainBackend};
use rullama_finetune::gpu::GpuTapeBackend;
use rullama_finetune::lora::{LoraSpec, Target, TrainableLora};
use rullama_finetune::optim::AdamWConfig;
use rullama_finetune::tape::{Matrix, TapeBackend};
use rullama_gguf::GgufFile;
use rullama_kernels::Gpu;
use rullama_model::Model;
use rullama_synth::{Tiny, tiny_model};

/// The loss: a sum of a dozen f32 cross-entropies, each from f32 logits.
const LOSS_REL: f64 = 1e-5;
/// A gradient matrix's largest difference from the tape's, over its largest entry: each
/// entry is a sum over tokens of f32 products along ~20 kernels per layer.
const GRAD_REL: f64 = 5e-5;

fn spec() -> LoraSpec {
    LoraSpec {
        rank: 2,
        alpha: 4.0,
        targets: Target::ALL.to_vec(),
        rslora: false,
        dropout: 0.0,
    }
}

fn optim() -> AdamWConfig {
    AdamWConfig {
        lr: 1e-2,
        ..AdamWConfig::default()
    }
}

/// `lora`'s initial values with a random B (a zero B would leave A's gradient zero).
fn params(lora: &TrainableLora) -> Vec<Matrix> {
    let mut params = lora.init(5);
    let mut salt = 0.37f64;
    for b in params.iter_mut().skip(1).step_by(2) {
        for v in &mut b.data {
            salt = (salt * 997.0 + 0.123).fract();
            *v = 0.2 * (salt - 0.5);
        }
    }
    params
}

fn engine<'m, B: TrainBackend>(
    model: &'m mut Option<Model<B>>,
    file: &GgufFile<Vec<u8>>,
    backend: B,
) -> Box<dyn Engine + 'm> {
    let mut m = Model::load(file, backend).unwrap();
    let lora = TrainableLora::new(&m.lora_projections(), spec()).unwrap();
    m.set_lora_weights("trained", lora.weights_with(B::param))
        .unwrap();
    let model = model.insert(m);
    B::engine(model, &lora, params(&lora), optim(), 32).unwrap()
}

const A: [u32; 8] = [2, 40, 41, 7, 42, 9, 43, 5];
const A_MASK: [bool; 8] = [false, true, true, false, true, true, true, true];
const B: [u32; 5] = [2, 300, 17, 250, 99];
const B_MASK: [bool; 5] = [false, false, true, true, true];

fn examples() -> [MaskedTokens<'static>; 2] {
    [
        MaskedTokens {
            tokens: &A,
            mask: &A_MASK,
        },
        MaskedTokens {
            tokens: &B,
            mask: &B_MASK,
        },
    ]
}

fn check(tiny: Tiny) {
    check_with(tiny, usize::MAX);
}

/// `head_chunk_bytes`: the loss head's chunk (a few rows makes several chunks).
fn check_with(tiny: Tiny, head_chunk_bytes: usize) {
    if std::env::var_os("RULLAMA_NO_GPU_TESTS").is_some() {
        eprintln!("RULLAMA_NO_GPU_TESTS is set: GPU engine tests skipped");
        return;
    }
    let gpu = Arc::new(Gpu::open().expect("a GPU adapter (lavapipe will do)"));
    let file = GgufFile::from_bytes(tiny_model(tiny, 11)).unwrap();
    let (mut cpu_model, mut gpu_model) = (None, None);
    let mut cpu = engine(&mut cpu_model, &file, TapeBackend::new());
    let mut dev = engine(
        &mut gpu_model,
        &file,
        GpuTapeBackend::new(gpu, false).with_head_chunk_bytes(head_chunk_bytes),
    );
    let weight = 1.0 / 9.0;
    let seeds = [0, 0];
    let want = cpu.accumulate(&examples(), weight, &seeds).unwrap();
    let got = dev.accumulate(&examples(), weight, &seeds).unwrap();
    let rel = (got - want).abs() / want.abs();
    eprintln!("{tiny:?}: loss {got} vs tape {want} (rel {rel:.1e})");
    assert!(rel <= LOSS_REL, "{tiny:?}: loss {got} vs tape {want}");
    let (want, got) = (cpu.gradients().unwrap(), dev.gradients().unwrap());
    let mut worst = 0f64;
    for (i, (w, g)) in want.iter().zip(&got).enumerate() {
        let scale = w.data.iter().fold(0f64, |m, v| m.max(v.abs()));
        assert!(scale > 0.0, "{tiny:?}: parameter {i} has no gradient");
        let diff = w
            .data
            .iter()
            .zip(&g.data)
            .fold(0f64, |m, (a, b)| m.max((a - b).abs()));
        worst = worst.max(diff / scale);
        assert!(
            diff <= GRAD_REL * scale,
            "{tiny:?}: parameter {i}: gradients differ by {diff:e} of {scale:e}"
        );
    }
    eprintln!("{tiny:?}: gradients within {worst:.1e} of the largest entry");
    // Five steps: the same course.
    for step in 0..5 {
        cpu.update(1e-2).unwrap();
        dev.update(1e-2).unwrap();
        let want = cpu.accumulate(&examples(), weight, &seeds).unwrap();
        let got = dev.accumulate(&examples(), weight, &seeds).unwrap();
        let rel = (got - want).abs() / want.abs();
        assert!(
            rel <= 1e-4,
            "{tiny:?}: step {step}: loss {got} vs tape {want}"
        );
    }
    let eval = dev.loss(&examples(), weight).unwrap();
    let want = cpu.loss(&examples(), weight).unwrap();
    assert!(
        (eval - want).abs() <= 1e-4 * want.abs(),
        "{tiny:?}: eval {eval} vs {want}"
    );
    let bytes = dev.device_bytes().unwrap();
    assert!(bytes > 0);
}

#[test]
fn gemma3_gpu_step_matches_the_tape() {
    check(Tiny::Gemma3);
}

#[test]
fn llama_gpu_step_matches_the_tape() {
    check(Tiny::Llama);
}

#[test]
fn qwen2_gpu_step_matches_the_tape() {
    check(Tiny::Qwen2);
}

#[test]
fn the_loss_head_in_chunks_of_a_few_rows_gives_the_same_step() {
    // Five rows of the tiny vocabulary's logits a chunk: the 32-token step in seven.
    let vocab = GgufFile::from_bytes(tiny_model(Tiny::Llama, 11))
        .map(|f| rullama_model::ModelConfig::from_gguf(&f).unwrap().n_vocab)
        .unwrap();
    check_with(Tiny::Llama, 5 * vocab * 4);
}
