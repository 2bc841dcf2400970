//! What the GPU plan's lowering makes of a training step, counted: the dispatches per kernel
//! of one step of the tiny Gemma 3 (6 layers, every projection adapted, two examples of 100
//! and 80 tokens: 256 rows with the filler, enough for the adapter gradients' sums to split
//! as a real step's do), with and without LoRA dropout, printed (`--nocapture`) with the
//! engine's device bytes, and held to what the lowering reaches: no element-wise copy where
//! a value or a gradient can be written in place or shared.
//!
//! No adapter: the test fails, unless `RULLAMA_NO_GPU_TESTS=1`, which skips it.

use std::collections::BTreeMap;
use std::sync::Arc;

use rullama_finetune::engine::{MaskedTokens, TrainBackend};
use rullama_finetune::gpu::GpuTapeBackend;
use rullama_finetune::lora::{LoraSpec, Target, TrainableLora};
use rullama_finetune::optim::AdamWConfig;
use rullama_gguf::GgufFile;
use rullama_kernels::Gpu;
use rullama_model::Model;
use rullama_synth::{Tiny, tiny_model};

/// One training step's dispatches by kernel name, and the engine's device bytes after it.
fn count(gpu: &Arc<Gpu>, file: &GgufFile<Vec<u8>>, dropout: f32) -> (BTreeMap<String, usize>, u64) {
    let mut model = Model::load(file, GpuTapeBackend::new(Arc::clone(gpu), false)).unwrap();
    let spec = LoraSpec {
        rank: 2,
        alpha: 4.0,
        targets: Target::ALL.to_vec(),
        rslora: false,
        dropout,
    };
    let lora = TrainableLora::new(&model.lora_projections(), spec).unwrap();
    model
        .set_lora_weights("trained", lora.weights_with(GpuTapeBackend::param))
        .unwrap();
    let mut engine =
        GpuTapeBackend::engine(&model, lora.init(5), AdamWConfig::default(), 128).unwrap();
    let tokens: Vec<u32> = (0..180).map(|i| (i * 37 + 11) % 250).collect();
    let mask = [true; 100];
    let examples = [
        MaskedTokens {
            tokens: &tokens[..100],
            mask: &mask,
        },
        MaskedTokens {
            tokens: &tokens[100..],
            mask: &mask[..80],
        },
    ];
    engine.accumulate(&examples, 1.0, &[1, 2]).unwrap();
    let mut counts = BTreeMap::new();
    for k in engine.step_kernels() {
        *counts.entry(k.name()).or_insert(0) += 1;
    }
    (counts, engine.device_bytes().unwrap())
}

#[test]
fn a_training_step_dispatches_no_element_wise_copies() {
    if std::env::var_os("RULLAMA_NO_GPU_TESTS").is_some() {
        eprintln!("RULLAMA_NO_GPU_TESTS is set: GPU dispatch count skipped");
        return;
    }
    let gpu = Arc::new(Gpu::open().expect("a GPU adapter (lavapipe will do)"));
    let file = GgufFile::from_bytes(tiny_model(Tiny::Gemma3, 11)).unwrap();
    for dropout in [0.0, 0.05] {
        let (counts, bytes) = count(&gpu, &file, dropout);
        let total: usize = counts.values().sum();
        eprintln!("tiny gemma3, dropout {dropout}: {total} dispatches, {bytes} device bytes");
        for (name, n) in &counts {
            eprintln!("  {n:5} {name}");
        }
        assert_eq!(
            counts.get("copy"),
            None,
            "dropout {dropout}: a value or gradient copied before an op changes it"
        );
    }
}
