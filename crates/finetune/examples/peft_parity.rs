//! What PEFT must reproduce (`docs/device/peft-parity.sh`): for a GGUF model, one fixed batch
//! of two sequences, an adapter of rank 4 on every projection at PEFT's initial values, the
//! tape's loss and LoRA gradients of step 1 and its losses over 20 AdamW steps.
//!
//! `cargo run --release -p rullama-finetune --example peft_parity -- MODEL.gguf OUT_DIR`
//! writes `OUT_DIR/init/` (the initial adapter, a PEFT directory), `OUT_DIR/grads/` (step 1's
//! gradients in the same layout: `lora_A` holds dL/dA, `lora_B` dL/dB) and
//! `OUT_DIR/expect.json` (the batch, the settings and the losses).

use std::path::PathBuf;

use rullama_finetune::data::{Batch, Span};
use rullama_finetune::lora::{LoraSpec, Target};
use rullama_finetune::optim::{AdamWConfig, Schedule};
use rullama_finetune::step::accumulate;
use rullama_finetune::tape::{Matrix, TapeBackend};
use rullama_finetune::train::{TrainConfig, Trainer, attach};
use rullama_model::lora::peft::{self, PeftOptions};
use rullama_model::{LoraAdapter, Model};

const STEPS: u64 = 20;
const SEED: u64 = 17;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let [_, model_path, out] = &args[..] else {
        return Err("usage: peft_parity MODEL.gguf OUT_DIR".into());
    };
    let out = PathBuf::from(out);
    std::fs::create_dir_all(&out)?;
    let mut model = Model::open(model_path, TapeBackend::new())?;
    let spec = LoraSpec {
        rank: 4,
        alpha: 8.0,
        targets: Target::ALL.to_vec(),
        rslora: false,
        dropout: 0.0,
    };
    let lora = attach(&mut model, spec.clone())?;
    let cfg = model.config().clone();
    let arch = cfg.arch.name();

    // Two sequences of token ids drawn from the first 1000 (any vocabulary has them), the
    // first five of each unlearnt, as a prompt is; the shorter one padded.
    let vocab = cfg.n_vocab.min(1000) as u64;
    let mut state = SEED;
    let mut draw = || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        3 + ((state >> 33) % (vocab - 3)) as u32
    };
    let lens = [24usize, 17];
    let width = lens[0];
    let mut tokens = Vec::new();
    let mut mask = Vec::new();
    for &len in &lens {
        for j in 0..width {
            tokens.push(if j < len { draw() } else { 0 });
            mask.push(j < len && j >= 5);
        }
    }
    let batch = Batch {
        rows: 2,
        width,
        tokens: tokens.clone(),
        mask: mask.clone(),
        spans: lens
            .iter()
            .map(|&len| vec![Span { start: 0, len }])
            .collect(),
        examples: vec![0, 1],
    };

    let config = TrainConfig {
        optim: AdamWConfig {
            lr: 1e-3,
            weight_decay: 0.01,
            max_grad_norm: 1.0,
            ..AdamWConfig::default()
        },
        schedule: Schedule::Constant,
        warmup: 0,
        steps: STEPS,
        seed: SEED,
    };
    let init = lora.init(SEED);
    let write = |dir: &str, params: &[Matrix]| -> Result<(), Box<dyn std::error::Error>> {
        let adapter = LoraAdapter::from_pairs(dir, arch, spec.alpha, lora.to_pairs(params))?;
        peft::write(&out.join(dir), &adapter, &cfg, &PeftOptions::default())?;
        Ok(())
    };
    write("init", &init)?;

    // Step 1's loss and gradients, from the initial values.
    let weight = 1.0 / batch.trainable() as f32;
    let mut session = model.session(width)?;
    *session.sequence_mut().params_mut() = init.clone();
    let mut grads: Vec<Matrix> = init.iter().map(|p| Matrix::zeros(p.rows, p.cols)).collect();
    let mut loss1 = 0.0;
    for (r, &len) in lens.iter().enumerate() {
        let (t, m) = (&batch.row(r)[..len], &batch.row_mask(r)[..len]);
        loss1 += accumulate(&mut session, t, m, weight, &mut grads)?;
    }
    write("grads", &grads)?;
    drop(session);

    let mut trainer = Trainer::new(&model, lora.clone(), config.clone(), width)?;
    let mut losses = Vec::new();
    for _ in 0..STEPS {
        losses.push(trainer.step(std::slice::from_ref(&batch))?.loss);
    }
    let expect = serde_json::json!({
        "arch": arch,
        "head_dim": cfg.head_dim_k,
        // Each layer's RoPE (base, linear factor) and window: what a reader of the GGUF must
        // reproduce (transformers does not take Gemma 3's rope scaling from one).
        "layers": cfg.layers.iter().map(|l| serde_json::json!({
            "base": l.rope.base,
            "factor": 1.0 / l.rope.freq_scale,
            "window": l.window,
        })).collect::<Vec<_>>(),
        "tokens": tokens.chunks(width).collect::<Vec<_>>(),
        "mask": mask.chunks(width).collect::<Vec<_>>(),
        "lengths": lens,
        "rank": spec.rank,
        "alpha": spec.alpha,
        "lr": config.optim.lr,
        "weight_decay": config.optim.weight_decay,
        "max_grad_norm": config.optim.max_grad_norm,
        "loss1": loss1,
        "losses": losses,
    });
    std::fs::write(
        out.join("expect.json"),
        serde_json::to_string_pretty(&expect)?,
    )?;
    println!(
        "{arch}: step-1 loss {loss1:.6}, after {STEPS} steps {:.6}",
        losses.last().unwrap()
    );
    Ok(())
}
