//! The training loop's one step: a batch (or several, accumulated) forward and backward on
//! an [`Engine`] (the CPU tape or the GPU), then AdamW at the schedule's rate.

use rullama_kernels::StepProfile;
use rullama_model::Model;

use crate::data::{Batch, SplitMix64};
use crate::engine::{Engine, MaskedTokens, TrainBackend};
use crate::error::{FinetuneError, Result};
use crate::lora::{LoraSpec, TrainableLora};
use crate::optim::{AdamW, AdamWConfig, Schedule};
use crate::tape::Matrix;

/// How a run trains, besides the adapter's shape.
#[derive(Debug, Clone, PartialEq)]
pub struct TrainConfig {
    /// AdamW's settings; `lr` is the schedule's peak.
    pub optim: AdamWConfig,
    /// The learning rate's course.
    pub schedule: Schedule,
    /// Steps of linear warm-up.
    pub warmup: u64,
    /// Optimizer steps in the whole run (the schedule ends there).
    pub steps: u64,
    /// The seed of the adapter's initial values.
    pub seed: u64,
}

/// Skipped steps in a row after which [`Trainer::step`] stops with
/// [`FinetuneError::NonFiniteGradient`].
///
/// A skipped step leaves the adapter as it was, so a trainer that went on would draw batch
/// after batch without learning and, as its loop counts applied steps, never end. One
/// overflow is an unlucky batch (the tensor cores' backward rounds some gradients to f16 at a
/// fixed scale); five in a row, on the same parameters, say the overflow is systematic,
/// which only the user can change (f32 products, a lower rate): stopping with an error that
/// names the step tells them, and the last applied step's adapter is intact.
pub const MAX_SKIPPED_IN_A_ROW: u32 = 5;

/// What one optimizer step did.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepReport {
    /// The optimizer step this was, from 1: steps applied before it, plus one. A skipped
    /// step's number is taken again by the next step.
    pub step: u64,
    /// Whether the step was skipped, not applied: its gradient was not finite (NaN or
    /// infinite), so parameters, moments and the step count stayed as they were.
    pub skipped: bool,
    /// Mean cross-entropy per trainable token of the step's batches (computed whether or not
    /// the step was applied).
    pub loss: f64,
    /// The gradients' global norm before clipping (not finite where the step was skipped).
    pub grad_norm: f64,
    /// The learning rate the step used.
    pub lr: f64,
    /// Tokens run (padding excluded).
    pub tokens: usize,
    /// Tokens whose prediction was learnt.
    pub trainable: usize,
}

/// Makes `model` trainable with an adapter of `spec` on every projection it targets: the
/// adapter's parameters enter the model's graph through `Model::set_lora_weights`.
pub fn attach<B: TrainBackend>(model: &mut Model<B>, spec: LoraSpec) -> Result<TrainableLora> {
    let lora = TrainableLora::new(&model.lora_projections(), spec)?;
    model.set_lora_weights("the adapter being trained", lora.weights_with(B::param))?;
    Ok(lora)
}

/// A training run over one model: its engine (the CPU tape or the GPU, which holds the
/// parameters and the optimizer's state), the adapter's shape and the run's settings.
#[derive(Debug)]
pub struct Trainer<'m> {
    engine: Box<dyn Engine + 'm>,
    lora: TrainableLora,
    config: TrainConfig,
    /// Steps skipped since the last one applied (not saved in a checkpoint: a resumed run
    /// counts afresh).
    skipped_in_a_row: u32,
}

impl<'m> Trainer<'m> {
    /// A run of `config` for the adapter `lora` (from [`attach`] on `model`), sequences of at
    /// most `n_ctx` tokens, starting from PEFT's initial values drawn with `config.seed`.
    pub fn new<B: TrainBackend>(
        model: &'m Model<B>,
        lora: TrainableLora,
        config: TrainConfig,
        n_ctx: usize,
    ) -> Result<Trainer<'m>> {
        let params = lora.init(config.seed);
        let engine = B::engine(model, params, config.optim, n_ctx)?;
        Ok(Trainer {
            engine,
            lora,
            config,
            skipped_in_a_row: 0,
        })
    }

    /// The adapter's shape.
    pub fn lora(&self) -> &TrainableLora {
        &self.lora
    }

    /// The adapter's current values (parameter `2i`: pair `i`'s `A`, `2i + 1` its `B`).
    pub fn params(&self) -> Result<Vec<Matrix>> {
        self.engine.params()
    }

    /// The optimizer's state.
    pub fn optimizer(&self) -> Result<AdamW> {
        self.engine.optimizer()
    }

    /// Optimizer steps applied (skipped ones not counted).
    pub fn steps(&self) -> u64 {
        self.engine.steps()
    }

    /// Where the last step's GPU time went (`Engine::profile`); `None` for the CPU tape.
    pub fn profile(&mut self) -> Result<Option<StepProfile>> {
        self.engine.profile()
    }

    /// Bytes its engine holds on the device; `None` for the CPU tape.
    pub fn device_bytes(&self) -> Option<u64> {
        self.engine.device_bytes()
    }

    /// The run's settings.
    pub fn config(&self) -> &TrainConfig {
        &self.config
    }

    /// Puts back a checkpoint's parameters and optimizer state (shapes checked by the
    /// caller against [`Trainer::params`]).
    pub fn restore(&mut self, params: Vec<Matrix>, opt: AdamW) -> Result<()> {
        self.skipped_in_a_row = 0;
        self.engine.restore(params, opt)
    }

    /// One optimizer step over `batches` (one, or several accumulated): the loss is the
    /// mean over all their trainable tokens, so accumulating `k` batches is the step of
    /// their union. A gradient that is not finite is not applied: the report says
    /// `skipped`, and the next call retries the same step number (same rate, same dropout
    /// seeds) on its own batches; the [`MAX_SKIPPED_IN_A_ROW`]th skip in a row is
    /// [`FinetuneError::NonFiniteGradient`] instead.
    pub fn step(&mut self, batches: &[Batch]) -> Result<StepReport> {
        let trainable: usize = batches.iter().map(Batch::trainable).sum();
        if trainable == 0 {
            return Err(FinetuneError::NothingToLearn);
        }
        let weight = 1.0 / trainable as f32;
        let (seed, steps) = (self.config.seed, self.engine.steps());
        let mut loss = 0.0;
        let mut example = 0u64;
        for batch in batches {
            let examples = examples(batch);
            let seeds: Vec<u64> = (example..example + examples.len() as u64)
                .map(|e| dropout_seed(seed, steps, e))
                .collect();
            example += examples.len() as u64;
            if !examples.is_empty() {
                loss += self.engine.accumulate(&examples, weight, &seeds)?;
            }
        }
        let c = &self.config;
        let lr = c.optim.lr * c.schedule.factor(steps, c.warmup, c.steps);
        let grad_norm = self.engine.update(lr)?;
        let skipped = !grad_norm.is_finite();
        if skipped {
            self.skipped_in_a_row += 1;
            if self.skipped_in_a_row >= MAX_SKIPPED_IN_A_ROW {
                return Err(FinetuneError::NonFiniteGradient {
                    step: steps + 1,
                    in_a_row: self.skipped_in_a_row,
                });
            }
        } else {
            self.skipped_in_a_row = 0;
        }
        Ok(StepReport {
            step: steps + 1,
            skipped,
            loss,
            grad_norm,
            lr,
            tokens: batches.iter().map(Batch::real_tokens).sum(),
            trainable,
        })
    }

    /// The mean cross-entropy per trainable token over `batches`, without learning; `None`
    /// when they hold no trainable token.
    pub fn eval(&mut self, batches: &[Batch]) -> Result<Option<f64>> {
        let trainable: usize = batches.iter().map(Batch::trainable).sum();
        if trainable == 0 {
            return Ok(None);
        }
        let weight = 1.0 / trainable as f32;
        let mut loss = 0.0;
        for batch in batches {
            let examples = examples(batch);
            if !examples.is_empty() {
                loss += self.engine.loss(&examples, weight)?;
            }
        }
        Ok(Some(loss))
    }
}

/// The seed of the dropout masks of example `example` of optimizer step `step` (0-based) of a
/// run seeded `seed`: a function of the three alone, so a resumed run draws the same masks.
fn dropout_seed(seed: u64, step: u64, example: u64) -> u64 {
    let mixed = seed
        ^ step.wrapping_mul(0xA076_1D64_78BD_642F)
        ^ example.wrapping_mul(0xE703_7ED1_A0B4_28DB);
    SplitMix64::new(mixed).next_u64()
}

/// Every example of `batch` with something to learn, each a sequence from position 0 (a
/// packed row's spans apart: training attends within a sequence).
fn examples(batch: &Batch) -> Vec<MaskedTokens<'_>> {
    let mut out = Vec::new();
    for (r, spans) in batch.spans.iter().enumerate() {
        let (tokens, mask) = (batch.row(r), batch.row_mask(r));
        for s in spans {
            let range = s.start..s.start + s.len;
            if mask[range.clone()].iter().any(|&m| m) {
                out.push(MaskedTokens {
                    tokens: &tokens[range.clone()],
                    mask: &mask[range],
                });
            }
        }
    }
    out
}
