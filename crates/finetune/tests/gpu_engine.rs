//! The GPU engine against the CPU tape (f64, itself checked against finite differences in
//! `gradients.rs`), on the tiny random model of each architecture with every projection
//! adapted (lavapipe in CI): a step of two examples packed into one GPU step gives the same
//! loss and LoRA gradients to f32 rounding, and five AdamW steps the same losses.
//!
//! No adapter: the tests fail, unless `RULLAMA_NO_GPU_TESTS=1`, which skips them.

use std::sync::Arc;

use rullama_finetune::FinetuneError;
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

fn spec(dropout: f32) -> LoraSpec {
    LoraSpec {
        rank: 2,
        alpha: 4.0,
        targets: Target::ALL.to_vec(),
        rslora: false,
        dropout,
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
    engine_with(model, file, backend, 0.0)
}

fn engine_with<'m, B: TrainBackend>(
    model: &'m mut Option<Model<B>>,
    file: &GgufFile<Vec<u8>>,
    backend: B,
    dropout: f32,
) -> Box<dyn Engine + 'm> {
    let mut m = Model::load(file, backend).unwrap();
    let lora = TrainableLora::new(&m.lora_projections(), spec(dropout)).unwrap();
    m.set_lora_weights("trained", lora.weights_with(B::param))
        .unwrap();
    let model = model.insert(m);
    B::engine(model, params(&lora), optim(), 32).unwrap()
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

fn bits(ms: &[Matrix]) -> Vec<u64> {
    ms.iter()
        .flat_map(|m| m.data.iter().map(|v| v.to_bits()))
        .collect()
}

/// A gradient that is not finite (the loss's weight infinite, so the gradients are infinities
/// and NaNs) is skipped alike by the GPU engine, on the device, and by the tape: parameters,
/// moments and the step count keep their bits, and the gradients are cleared all the same.
/// The next finite step is then applied by both, to the same loss.
#[test]
fn both_engines_skip_a_gradient_that_is_not_finite() {
    if std::env::var_os("RULLAMA_NO_GPU_TESTS").is_some() {
        eprintln!("RULLAMA_NO_GPU_TESTS is set: GPU engine tests skipped");
        return;
    }
    let gpu = Arc::new(Gpu::open().expect("a GPU adapter (lavapipe will do)"));
    let file = GgufFile::from_bytes(tiny_model(Tiny::Llama, 11)).unwrap();
    let (mut cpu_model, mut gpu_model) = (None, None);
    let mut cpu = engine(&mut cpu_model, &file, TapeBackend::new());
    let mut dev = engine(&mut gpu_model, &file, GpuTapeBackend::new(gpu, false));
    let (weight, seeds) = (1.0 / 9.0, [0, 0]);
    for (name, e) in [("tape", &mut cpu), ("gpu", &mut dev)] {
        // One step applied first, so that the moments are not zero.
        e.accumulate(&examples(), weight, &seeds).unwrap();
        assert!(e.update(1e-2).unwrap().is_finite());
        let (params, opt) = (e.params().unwrap(), e.optimizer().unwrap());
        e.accumulate(&examples(), f32::INFINITY, &seeds).unwrap();
        let norm = e.update(1e-2).unwrap();
        assert!(!norm.is_finite(), "{name}: gradient norm {norm}");
        assert_eq!(e.steps(), 1, "{name}: a skipped step counted");
        let now = e.optimizer().unwrap();
        for (what, was, is) in [
            ("parameters", &params, &e.params().unwrap()),
            ("first moments", &opt.m, &now.m),
            ("second moments", &opt.v, &now.v),
        ] {
            assert!(bits(was) == bits(is), "{name}: the {what} changed");
        }
        assert_eq!(now.steps, 1, "{name}: AdamW's steps");
        let cleared = e.gradients().unwrap();
        assert!(
            cleared.iter().all(|g| g.data.iter().all(|&v| v == 0.0)),
            "{name}: the skipped step's gradients were not cleared"
        );
    }
    let want = cpu.accumulate(&examples(), weight, &seeds).unwrap();
    let got = dev.accumulate(&examples(), weight, &seeds).unwrap();
    assert!((got - want).abs() <= 1e-4 * want.abs(), "{got} vs {want}");
    assert!(cpu.update(1e-2).unwrap().is_finite() && dev.update(1e-2).unwrap().is_finite());
    assert_eq!((cpu.steps(), dev.steps()), (2, 2));
    let want = cpu.loss(&examples(), weight).unwrap();
    let got = dev.loss(&examples(), weight).unwrap();
    assert!((got - want).abs() <= 1e-4 * want.abs(), "{got} vs {want}");
}

/// LoRA dropout on the GPU: evaluation drops nothing (the loss without dropout, bit for
/// bit); a training step's masks are a function of its seed (the same seed, the same loss
/// and gradients; another seed, another loss); and the gradients are those of the loss with
/// the step's masks held fixed: the largest entries of the first adapter's A and B against
/// central differences of the GPU's own f32 loss (step 1e-2: the loss's f32 rounding, a few
/// 1e-7 of 7, over 2h is ~2e-5, under the 1e-4 allowed; they agree to about 5e-5 relative
/// here, and a product that forgot the mask in its backward errs by tens of percent at
/// p = 0.3).
#[test]
fn lora_dropout_on_the_gpu() {
    if std::env::var_os("RULLAMA_NO_GPU_TESTS").is_some() {
        eprintln!("RULLAMA_NO_GPU_TESTS is set: GPU engine tests skipped");
        return;
    }
    let gpu = Arc::new(Gpu::open().expect("a GPU adapter (lavapipe will do)"));
    let file = GgufFile::from_bytes(tiny_model(Tiny::Llama, 11)).unwrap();
    let (mut plain_model, mut dropped_model) = (None, None);
    let backend = || GpuTapeBackend::new(Arc::clone(&gpu), false);
    let mut plain = engine_with(&mut plain_model, &file, backend(), 0.0);
    let mut dev = engine_with(&mut dropped_model, &file, backend(), 0.3);
    let weight = 1.0 / 9.0;
    let eval = dev.loss(&examples(), weight).unwrap();
    assert_eq!(
        eval,
        plain.loss(&examples(), weight).unwrap(),
        "evaluation dropped something"
    );

    let step = |dev: &mut Box<dyn Engine + '_>, seed: u64| {
        let loss = dev.accumulate(&examples(), weight, &[seed, seed]).unwrap();
        let grads = dev.gradients().unwrap();
        dev.update(0.0).unwrap();
        (loss, grads)
    };
    let (loss, grads) = step(&mut dev, 41);
    assert_ne!(loss, eval, "dropout changed nothing");
    let again = step(&mut dev, 41);
    assert_eq!(
        (loss, &grads),
        (again.0, &again.1),
        "the same seed drew other masks"
    );
    assert_ne!(
        loss,
        step(&mut dev, 42).0,
        "another seed drew the same masks"
    );

    let params = dev.params().unwrap();
    let opt = dev.optimizer().unwrap();
    for id in [0, 1] {
        let g = &grads[id];
        let (at, &want) = g
            .data
            .iter()
            .enumerate()
            .max_by(|a, b| a.1.abs().total_cmp(&b.1.abs()))
            .unwrap();
        let h = 1e-2;
        let mut loss_at = |value: f64| {
            let mut p = params.clone();
            p[id].data[at] = value;
            dev.restore(p, opt.clone()).unwrap();
            step(&mut dev, 41).0
        };
        let x = params[id].data[at];
        let fd = (loss_at(x + h) - loss_at(x - h)) / (2.0 * h);
        assert!(
            (fd - want).abs() <= 0.01 * want.abs() + 1e-4,
            "parameter {id} entry {at}: GPU gradient {want:e}, finite difference {fd:e}"
        );
        eprintln!("parameter {id}: gradient {want:e}, finite difference {fd:e}");
    }
}

/// A step past the memory its buffers may take is `StepTooLarge` naming the largest step
/// that fits (as `--batch` at the context), found before any step ran; a step of that size
/// then runs within the limit.
#[test]
fn a_step_too_large_names_the_step_that_fits() {
    if std::env::var_os("RULLAMA_NO_GPU_TESTS").is_some() {
        return;
    }
    let gpu = Arc::new(Gpu::open().expect("a GPU adapter (lavapipe will do)"));
    let file = GgufFile::from_bytes(tiny_model(Tiny::Gemma3, 11)).unwrap();
    // Sequences of the engine's context (32 tokens), every token learnt.
    let tokens: Vec<u32> = (0..32).map(|i| 2 + i).collect();
    let mask = vec![true; tokens.len()];
    let batch = |n: usize| {
        vec![
            MaskedTokens {
                tokens: &tokens,
                mask: &mask,
            };
            n
        ]
    };
    // The buffers a step of 1 and of 4 sequences takes, each on an engine of its own.
    let step_bytes = |n: usize| {
        let mut model = None;
        let mut e = engine(&mut model, &file, GpuTapeBackend::new(gpu.clone(), false));
        let before = e.device_bytes().unwrap();
        e.accumulate(&batch(n), 1.0, &vec![0; n]).unwrap();
        e.device_bytes().unwrap() - before
    };
    let (one, four) = (step_bytes(1), step_bytes(4));
    assert!(
        one < four,
        "steps of 1 and 4 sequences take {one} and {four} bytes"
    );
    let limit = (one + four) / 2;
    let mut model = None;
    let backend = GpuTapeBackend::new(gpu.clone(), false).with_step_bytes_limit(limit);
    let mut e = engine(&mut model, &file, backend);
    let before = e.device_bytes().unwrap();
    let fits = match e.accumulate(&batch(4), 1.0, &[0; 4]) {
        Err(err @ FinetuneError::StepTooLarge { tokens: 128, .. }) => {
            let message = err.to_string();
            eprintln!("{message}");
            let FinetuneError::StepTooLarge { fits, .. } = err else {
                unreachable!()
            };
            let fits = fits.expect("the engine searched for a step that fits");
            assert_eq!(fits.ctx, 32);
            assert!(
                (32..128).contains(&fits.tokens) && fits.tokens % 32 == 0,
                "{fits:?}"
            );
            let hint = format!("--batch {} at --ctx 32", fits.tokens / 32);
            assert!(message.contains(&hint), "{message}");
            fits.tokens / 32
        }
        other => panic!("expected StepTooLarge for 128 tokens, got {other:?}"),
    };
    let loss = e.accumulate(&batch(fits), 1.0, &vec![0; fits]).unwrap();
    assert!(loss.is_finite() && loss > 0.0, "loss {loss}");
    let used = e.device_bytes().unwrap() - before;
    assert!(used <= limit, "{used} bytes past the limit {limit}");
}
