//! A run resumed from a checkpoint computes the same bits as one that never stopped: 10
//! steps straight equal 5 steps, a checkpoint, a new process's worth of state, 5 steps.

mod common;

use std::path::Path;

use rullama_finetune::checkpoint;
use rullama_finetune::data::{Batches, Dataset};
use rullama_finetune::lora::{LoraSpec, Target};
use rullama_finetune::optim::{AdamWConfig, Schedule};
use rullama_finetune::tape::TapeBackend;
use rullama_finetune::train::{TrainConfig, Trainer, attach};
use rullama_gguf::GgufFile;
use rullama_model::Model;
use rullama_synth::{Tiny, tiny_model};

use common::{toy_batch_config, toy_data};

const STEPS: u64 = 10;

fn run(
    file: &GgufFile<Vec<u8>>,
    data: &Dataset,
    stop_at: Option<(u64, &Path)>,
    resume: Option<&Path>,
) -> Vec<f64> {
    let mut model = Model::load(file, TapeBackend::new()).unwrap();
    let spec = LoraSpec {
        rank: 2,
        alpha: 4.0,
        targets: vec![Target::Q, Target::V, Target::Down],
        rslora: true,
        dropout: 0.0,
    };
    let lora = attach(&mut model, spec).unwrap();
    let config = TrainConfig {
        optim: AdamWConfig {
            lr: 5e-3,
            weight_decay: 0.01,
            ..AdamWConfig::default()
        },
        schedule: Schedule::Cosine,
        warmup: 3,
        steps: STEPS,
        seed: 9,
    };
    let mut trainer = Trainer::new(&model, lora, config, 16).unwrap();
    let batch_config = toy_batch_config();
    let mut batches = match resume {
        Some(path) => {
            let position = checkpoint::load(path)
                .unwrap()
                .restore_into(path, &mut trainer)
                .unwrap();
            Batches::resume(data, batch_config, position).unwrap()
        }
        None => Batches::new(data, batch_config).unwrap(),
    };
    while trainer.steps() < STEPS {
        if let Some((at, path)) = stop_at
            && trainer.steps() == at
        {
            checkpoint::save(path, &trainer, batches.position()).unwrap();
            break;
        }
        trainer.step(&[batches.next_batch()]).unwrap();
    }
    trainer
        .params()
        .unwrap()
        .iter()
        .flat_map(|p| p.data.clone())
        .collect()
}

#[test]
fn ten_steps_equal_five_a_checkpoint_and_five() {
    let file = GgufFile::from_bytes(tiny_model(Tiny::Smollm2, 5)).unwrap();
    let data = toy_data();
    let dir = tempfile::tempdir().unwrap();
    let ckpt = dir.path().join("a.ckpt.safetensors");
    let straight = run(&file, &data, None, None);
    run(&file, &data, Some((5, &ckpt)), None);
    let resumed = run(&file, &data, None, Some(&ckpt));
    assert!(straight.iter().any(|&v| v != 0.0));
    let same = straight
        .iter()
        .zip(&resumed)
        .all(|(a, b)| a.to_bits() == b.to_bits());
    assert!(
        same && straight.len() == resumed.len(),
        "the resumed run's adapter differs"
    );
}
