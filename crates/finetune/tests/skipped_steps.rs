//! A step whose gradient is not finite is skipped, through the trainer on the CPU tape: the
//! adapter, AdamW's moments and its step count stay bit for bit (so a checkpoint saved then
//! holds the state of the last applied step), the report says so, the
//! `MAX_SKIPPED_IN_A_ROW`th skip in a row stops the run with an error naming the step, and the
//! next applied step is the one a run that never skipped takes. The gradient is made NaN by
//! a NaN in one of the adapter's B entries, put there through `Trainer::restore`.

mod common;

use rullama_finetune::FinetuneError;
use rullama_finetune::checkpoint;
use rullama_finetune::data::{Batches, Dataset};
use rullama_finetune::lora::{LoraSpec, Target};
use rullama_finetune::optim::{AdamWConfig, Schedule};
use rullama_finetune::tape::{Matrix, TapeBackend};
use rullama_finetune::train::{MAX_SKIPPED_IN_A_ROW, TrainConfig, Trainer, attach};
use rullama_gguf::GgufFile;
use rullama_model::Model;
use rullama_synth::{Tiny, tiny_model};

use common::{toy_batch_config, toy_data};

fn new_batches(data: &Dataset) -> Batches<'_> {
    Batches::new(data, toy_batch_config()).unwrap()
}

/// A trainer over `model`, the adapter attached to it.
fn new_trainer(model: &mut Model<TapeBackend>) -> Trainer<'_> {
    let spec = LoraSpec {
        rank: 2,
        alpha: 4.0,
        targets: vec![Target::Q, Target::V, Target::Down],
        rslora: false,
        dropout: 0.1,
    };
    let lora = attach(model, spec).unwrap();
    let config = TrainConfig {
        optim: AdamWConfig {
            lr: 5e-3,
            weight_decay: 0.01,
            ..AdamWConfig::default()
        },
        schedule: Schedule::Cosine,
        warmup: 1,
        steps: 10,
        seed: 9,
    };
    Trainer::new(model, lora, config, 16).unwrap()
}

fn bits(params: &[Matrix]) -> Vec<u64> {
    params
        .iter()
        .flat_map(|p| p.data.iter().map(|v| v.to_bits()))
        .collect()
}

#[test]
fn a_gradient_that_is_not_finite_skips_the_step_and_five_in_a_row_stop_the_run() {
    let file = GgufFile::from_bytes(tiny_model(Tiny::Smollm2, 5)).unwrap();
    let data = toy_data();
    let mut model = Model::load(&file, TapeBackend::new()).unwrap();
    let mut trainer = new_trainer(&mut model);
    let mut batches = new_batches(&data);
    // Two steps applied first, so that the moments are not zero.
    for _ in 0..2 {
        assert!(!trainer.step(&[batches.next_batch()]).unwrap().skipped);
    }
    let (good, opt) = (trainer.params().unwrap(), trainer.optimizer().unwrap());
    assert_eq!(opt.steps, 2);
    let mut poisoned = good.clone();
    poisoned[1].data[0] = f64::NAN;
    trainer.restore(poisoned.clone(), opt.clone()).unwrap();

    let dir = tempfile::tempdir().unwrap();
    let ckpt = dir.path().join("a.ckpt.safetensors");
    for _ in 1..MAX_SKIPPED_IN_A_ROW {
        let report = trainer.step(&[batches.next_batch()]).unwrap();
        assert!(report.skipped, "{report:?}");
        assert_eq!(report.step, 3, "a skipped step's number is retried");
        assert!(!report.grad_norm.is_finite(), "{report:?}");
        assert_eq!(trainer.steps(), 2);
        assert!(bits(&trainer.params().unwrap()) == bits(&poisoned));
        assert_eq!(trainer.optimizer().unwrap(), opt);
        checkpoint::save(&ckpt, &trainer, batches.position()).unwrap();
        assert_eq!(checkpoint::load(&ckpt).unwrap().optimizer, opt);
    }
    match trainer.step(&[batches.next_batch()]) {
        Err(e @ FinetuneError::NonFiniteGradient { step: 3, in_a_row }) => {
            assert_eq!(in_a_row, MAX_SKIPPED_IN_A_ROW);
            let message = e.to_string();
            assert!(
                message.contains("step 3") && message.contains("after step 2"),
                "{message}"
            );
        }
        other => panic!("expected NonFiniteGradient at step 3, got {other:?}"),
    }
    assert_eq!(trainer.optimizer().unwrap(), opt);

    // Back to the last applied step's values: the next step is applied, and it is the step
    // a run that never skipped takes on the same batch (same rate, bias corrections and
    // dropout masks), bit for bit.
    trainer.restore(good, opt).unwrap();
    let batch = batches.next_batch();
    let report = trainer.step(std::slice::from_ref(&batch)).unwrap();
    assert!(!report.skipped && report.step == 3 && trainer.steps() == 3);

    let mut straight_model = Model::load(&file, TapeBackend::new()).unwrap();
    let mut straight = new_trainer(&mut straight_model);
    let mut straight_batches = new_batches(&data);
    for _ in 0..2 {
        straight.step(&[straight_batches.next_batch()]).unwrap();
    }
    let want = straight.step(&[batch]).unwrap();
    assert_eq!(report, want);
    assert!(bits(&trainer.params().unwrap()) == bits(&straight.params().unwrap()));
    assert_eq!(trainer.optimizer().unwrap(), straight.optimizer().unwrap());
}
