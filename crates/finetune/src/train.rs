//! The training loop's one step: a batch (or several, accumulated) forward and backward on
//! the tape, then AdamW at the schedule's rate.

use rullama_model::{Model, Session};

use crate::data::{Batch, SplitMix64};
use crate::error::{FinetuneError, Result};
use crate::lora::{LoraSpec, TrainableLora};
use crate::optim::{AdamW, AdamWConfig, Schedule};
use crate::step;
use crate::tape::{Matrix, TapeBackend};

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

/// What one optimizer step did.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepReport {
    /// Steps taken, this one included.
    pub step: u64,
    /// Mean cross-entropy per trainable token of the step's batches.
    pub loss: f64,
    /// The gradients' global norm before clipping.
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
pub fn attach(model: &mut Model<TapeBackend>, spec: LoraSpec) -> Result<TrainableLora> {
    let lora = TrainableLora::new(&model.lora_projections(), spec)?;
    model.set_lora_weights("the adapter being trained", lora.weights())?;
    Ok(lora)
}

/// A training run over one model: its session (the tape, which holds the parameters), the
/// adapter's shape and the optimizer.
#[derive(Debug)]
pub struct Trainer<'m> {
    session: Session<'m, TapeBackend>,
    lora: TrainableLora,
    opt: AdamW,
    config: TrainConfig,
}

impl<'m> Trainer<'m> {
    /// A run of `config` for the adapter `lora` (from [`attach`] on `model`), sequences of at
    /// most `n_ctx` tokens, starting from PEFT's initial values drawn with `config.seed`.
    pub fn new(
        model: &'m Model<TapeBackend>,
        lora: TrainableLora,
        config: TrainConfig,
        n_ctx: usize,
    ) -> Result<Trainer<'m>> {
        let mut session = model.session(n_ctx)?;
        let params = lora.init(config.seed);
        let opt = AdamW::new(config.optim, &params);
        *session.sequence_mut().params_mut() = params;
        Ok(Trainer {
            session,
            lora,
            opt,
            config,
        })
    }

    /// The adapter's shape.
    pub fn lora(&self) -> &TrainableLora {
        &self.lora
    }

    /// The adapter's current values (parameter `2i`: pair `i`'s `A`, `2i + 1` its `B`).
    pub fn params(&self) -> &[Matrix] {
        self.session.sequence().params()
    }

    /// The optimizer's state.
    pub fn optimizer(&self) -> &AdamW {
        &self.opt
    }

    /// The run's settings.
    pub fn config(&self) -> &TrainConfig {
        &self.config
    }

    /// Puts back a checkpoint's parameters and optimizer state (shapes checked by the
    /// caller against [`Trainer::params`]).
    pub fn restore(&mut self, params: Vec<Matrix>, opt: AdamW) {
        *self.session.sequence_mut().params_mut() = params;
        self.opt = opt;
    }

    /// One optimizer step over `batches` (one, or several accumulated): the loss is the
    /// mean over all their trainable tokens, so accumulating `k` batches is the step of
    /// their union.
    pub fn step(&mut self, batches: &[Batch]) -> Result<StepReport> {
        let trainable: usize = batches.iter().map(Batch::trainable).sum();
        if trainable == 0 {
            return Err(FinetuneError::NothingToLearn);
        }
        let weight = 1.0 / trainable as f32;
        let mut grads: Vec<Matrix> = self
            .params()
            .iter()
            .map(|p| Matrix::zeros(p.rows, p.cols))
            .collect();
        let mut loss = 0.0;
        let mut example = 0u64;
        let (seed, steps) = (self.config.seed, self.opt.steps);
        for_each_sequence(batches, |tokens, mask| {
            let tape = self.session.sequence_mut();
            tape.set_dropout_seed(Some(dropout_seed(seed, steps, example)));
            example += 1;
            loss += step::accumulate(&mut self.session, tokens, mask, weight, &mut grads)?;
            Ok(())
        })?;
        let c = &self.config;
        let lr = c.optim.lr * c.schedule.factor(self.opt.steps, c.warmup, c.steps);
        let params = self.session.sequence_mut().params_mut();
        let grad_norm = self.opt.step(params, &grads, lr);
        Ok(StepReport {
            step: self.opt.steps,
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
        self.session.sequence_mut().set_dropout_seed(None);
        for_each_sequence(batches, |tokens, mask| {
            loss += step::loss(&mut self.session, tokens, mask, weight)?;
            Ok(())
        })?;
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

/// Every example of `batches` with something to learn, as its own sequence from position
/// 0 (a packed row's spans apart: the tape attends within a step).
fn for_each_sequence(
    batches: &[Batch],
    mut f: impl FnMut(&[u32], &[bool]) -> Result<()>,
) -> Result<()> {
    for batch in batches {
        for (r, spans) in batch.spans.iter().enumerate() {
            let (tokens, mask) = (batch.row(r), batch.row_mask(r));
            for s in spans {
                let range = s.start..s.start + s.len;
                if mask[range.clone()].iter().any(|&m| m) {
                    f(&tokens[range.clone()], &mask[range])?;
                }
            }
        }
    }
    Ok(())
}
