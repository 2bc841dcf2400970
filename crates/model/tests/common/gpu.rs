//! What the GPU executor's integration tests share: the skip switch, the device, a cached
//! model's file, and one run of a prompt block then decode steps with the kernels each ran.

use std::sync::Arc;

use rullama_gguf::GgufFile;
use rullama_kernels::{Gpu, Kernel};
use rullama_model::gpu::GpuOptions;
use rullama_model::logits::log_softmax;
use rullama_model::{GpuBackend, Model, OutputRows};

/// Whether `RULLAMA_NO_GPU_TESTS` is set: the GPU tests then skip (and say so) instead of
/// failing for want of an adapter.
pub fn skip() -> bool {
    let skip = std::env::var_os("RULLAMA_NO_GPU_TESTS").is_some();
    if skip {
        eprintln!("RULLAMA_NO_GPU_TESTS is set: GPU backend tests skipped");
    }
    skip
}

/// A device for one test (lavapipe will do).
pub fn device() -> Arc<Gpu> {
    Arc::new(Gpu::open().expect("a GPU adapter (lavapipe will do)"))
}

/// The cached test model `name`'s file.
pub fn file(name: &str) -> GgufFile {
    GgufFile::open(super::cached(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// A prompt block, then one-token steps: what [`run`] feeds.
pub struct Script<'a> {
    pub ctx: usize,
    pub prompt: &'a [u32],
    /// The logits of every prompt row (`All`) or of its last (`Last`).
    pub prompt_rows: OutputRows,
    /// Tokens fed one step each after the prompt.
    pub steps: &'a [u32],
}

/// The logits of the prompt and of each step, the kernels of the prompt's step and of the
/// last decode step, and the model's layer count.
pub struct Run {
    pub n_layer: usize,
    pub prefill: Vec<Kernel>,
    pub decode: Vec<Kernel>,
    pub logits: Vec<Vec<f32>>,
}

impl Run {
    /// Every logit, prompt first, as bits (for bit-for-bit comparisons).
    pub fn bits(&self) -> Vec<u32> {
        self.logits.iter().flatten().map(|f| f.to_bits()).collect()
    }
}

/// Loads `file` on `gpu` with `options` and runs `script`.
pub fn run(gpu: &Arc<Gpu>, file: &GgufFile, options: GpuOptions, script: &Script<'_>) -> Run {
    let backend = GpuBackend::shared(Arc::clone(gpu)).with_options(options);
    let model = Model::load(file, backend).unwrap();
    let mut session = model.session(script.ctx).unwrap();
    let prompt = session
        .forward(script.prompt, 0, script.prompt_rows)
        .unwrap();
    let mut logits = vec![prompt.data];
    let prefill = model.backend().last_step_kernels();
    let mut decode = Vec::new();
    for (i, &t) in script.steps.iter().enumerate() {
        let pos = script.prompt.len() + i;
        let step = session.forward(&[t], pos, OutputRows::Last).unwrap();
        logits.push(step.data);
        decode = model.backend().last_step_kernels();
    }
    Run {
        n_layer: model.config().n_layer,
        prefill,
        decode,
        logits,
    }
}

/// How many of `kernels` match `f`.
pub fn count(kernels: &[Kernel], f: impl Fn(&Kernel) -> bool) -> usize {
    kernels.iter().filter(|k| f(k)).count()
}

/// `tests/gpu.rs`'s tight bars for two f32 paths over the same weights (its module doc says
/// why): max |Δlogit| relative to max |logit|, and top-10 log-probs in nats.
pub const LOGIT_REL: f64 = 1e-4;
pub const TOP10_NATS: f64 = 1e-3;

/// The worst deviations of logit rows from their references, over every row added.
#[derive(Debug, Default)]
pub struct Deviation {
    /// max |Δlogit| / max |logit of the reference|.
    pub logit_rel: f64,
    /// max |Δ log-prob| over the reference's 10 most likely tokens.
    pub top10_nats: f64,
}

impl Deviation {
    pub fn add(&mut self, got: &[f32], reference: &[f32]) {
        assert_eq!(got.len(), reference.len());
        let scale = reference
            .iter()
            .fold(0f64, |m, &v| m.max(f64::from(v).abs()));
        let diff = got.iter().zip(reference).fold(0f64, |m, (&g, &r)| {
            m.max((f64::from(g) - f64::from(r)).abs())
        });
        self.logit_rel = self.logit_rel.max(diff / scale);
        self.top10_nats = self.top10_nats.max(top10_nats(reference, got));
    }
}

/// The largest |difference| of log-probs over the reference's 10 most likely tokens.
pub fn top10_nats(reference: &[f32], other: &[f32]) -> f64 {
    let (a, b) = (log_softmax(reference), log_softmax(other));
    let mut order: Vec<usize> = (0..a.len()).collect();
    order.sort_by(|&i, &j| a[j].total_cmp(&a[i]));
    order[..10]
        .iter()
        .map(|&i| (a[i] - b[i]).abs())
        .fold(0.0, f64::max)
}
