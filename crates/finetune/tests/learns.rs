//! A tiny random model learns a toy task on the tape (counting: each token is the one after
//! the previous), and the adapter, written as llama.cpp's LoRA GGUF, makes the inference
//! executor count on held-out starts.

use std::path::Path;

use rullama_finetune::data::{BatchConfig, Batches, Dataset, Layout, Sequence};
use rullama_finetune::lora::{LoraSpec, Target};
use rullama_finetune::optim::{AdamWConfig, Schedule};
use rullama_finetune::tape::TapeBackend;
use rullama_finetune::train::{TrainConfig, Trainer, attach};
use rullama_gguf::GgufFile;
use rullama_model::{CpuBackend, LoraAdapter, Model};
use rullama_synth::{Tiny, tiny_model};

/// Counting runs over tokens `FIRST..FIRST + SPAN`, wrapping.
const FIRST: u32 = 10;
const SPAN: u32 = 40;

fn counting(start: u32, len: u32) -> Vec<u32> {
    (0..len).map(|i| FIRST + (start + i) % SPAN).collect()
}

fn dataset(starts: impl Iterator<Item = u32>) -> Dataset {
    let seqs = starts
        .map(|s| Sequence::new(counting(s, 10), vec![true; 10]).unwrap())
        .collect();
    Dataset::from_sequences(Path::new("counting.jsonl"), seqs, 16).unwrap()
}

#[test]
fn a_tiny_model_learns_to_count_and_its_adapter_runs() {
    let tiny = Tiny::Smollm2;
    let file = GgufFile::from_bytes(tiny_model(tiny, 3)).unwrap();
    let mut model = Model::load(&file, TapeBackend::new()).unwrap();
    let spec = LoraSpec {
        rank: 4,
        alpha: 8.0,
        targets: Target::ALL.to_vec(),
        rslora: false,
        dropout: 0.0,
    };
    let lora = attach(&mut model, spec.clone()).unwrap();
    let steps = 40;
    let config = TrainConfig {
        optim: AdamWConfig {
            lr: 1e-2,
            ..AdamWConfig::default()
        },
        schedule: Schedule::Linear,
        warmup: 2,
        steps,
        seed: 7,
    };
    let mut trainer = Trainer::new(&model, lora, config, 16).unwrap();
    // Held out: starts the training data never begins at.
    let train = dataset((0..SPAN).filter(|s| s % 5 != 0));
    let held_out = dataset((0..SPAN).filter(|s| s % 5 == 0));
    let eval_batches = {
        let cfg = BatchConfig {
            batch: held_out.len(),
            ctx: 16,
            layout: Layout::Padded,
            pad: 0,
            shuffle: false,
            seed: 0,
        };
        vec![Batches::new(&held_out, cfg).unwrap().next_batch()]
    };
    let before = trainer.eval(&eval_batches).unwrap().unwrap();
    let mut batches = Batches::new(
        &train,
        BatchConfig {
            batch: 4,
            ctx: 16,
            layout: Layout::Padded,
            pad: 0,
            shuffle: true,
            seed: 1,
        },
    )
    .unwrap();
    for _ in 0..steps {
        let report = trainer.step(&[batches.next_batch()]).unwrap();
        assert!(report.loss.is_finite() && report.grad_norm.is_finite());
    }
    let after = trainer.eval(&eval_batches).unwrap().unwrap();
    assert!(
        after < 0.5 * before,
        "held-out loss {before} -> {after}: not halved"
    );

    // The adapter as llama.cpp's GGUF, read back and run by the inference executor.
    let pairs = trainer.lora().to_pairs(&trainer.params().unwrap());
    let adapter = LoraAdapter::from_pairs("counting", tiny.arch_name(), spec.alpha, pairs).unwrap();
    let mut bytes = Vec::new();
    adapter.to_gguf().unwrap().write_to(&mut bytes).unwrap();
    let adapter = LoraAdapter::from_gguf_bytes(bytes, "counting.gguf").unwrap();
    let mut runner = Model::load(&file, CpuBackend::new()).unwrap();
    runner.apply_loras(&[(&adapter, 1.0)]).unwrap();
    let prompt = counting(15, 3);
    let mut session = runner.session(32).unwrap();
    let drawn = session.greedy(&prompt, 4).unwrap();
    assert_eq!(
        drawn,
        counting(18, 4),
        "the adapted model counts on from {prompt:?}"
    );
}
