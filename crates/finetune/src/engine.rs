//! Where a trainer's steps run: the seam between the training loop and an executor.
//!
//! [`Engine`] is what [`crate::train::Trainer`] asks of one: forward and backward over a
//! batch of examples with the gradients gathered, AdamW over them, and the state a checkpoint
//! saves. The CPU tape ([`crate::tape`], f64: the reference every gradient is checked
//! against) and the GPU ([`crate::gpu`]) each implement it, and [`TrainBackend`] makes a
//! model of either backend trainable, so the loop, the schedule and the checkpoints are one
//! code path over both.

use rullama_kernels::{Kernel, StepProfile};
use rullama_model::{Backend, Model};

use crate::error::Result;
use crate::optim::{AdamW, AdamWConfig};
use crate::tape::Matrix;

/// One sequence of a step: its tokens, from position 0, and which of them are predicted
/// (`mask[i]`: token `i`'s prediction from the tokens before it is learnt).
#[derive(Debug, Clone, Copy)]
pub struct MaskedTokens<'a> {
    /// The token ids.
    pub tokens: &'a [u32],
    /// One flag per token.
    pub mask: &'a [bool],
}

/// A trainer's executor: it holds the adapter's parameters, the gradients of the optimizer
/// step being gathered, and AdamW's state.
pub trait Engine: std::fmt::Debug {
    /// Runs `examples` forward and backward and adds `weight ×` the gradient of their summed
    /// masked cross-entropy to the gathered gradients; returns `weight ×` that loss.
    /// `dropout_seeds` (one per example) seed LoRA dropout's masks.
    fn accumulate(
        &mut self,
        examples: &[MaskedTokens<'_>],
        weight: f32,
        dropout_seeds: &[u64],
    ) -> Result<f64>;

    /// `weight ×` the summed masked cross-entropy of `examples`, without dropout or
    /// gradients (evaluation).
    fn loss(&mut self, examples: &[MaskedTokens<'_>], weight: f32) -> Result<f64>;

    /// One AdamW step at rate `lr` over the gradients gathered since the last one, which it
    /// then clears; returns their global norm before clipping. A norm that is not finite
    /// (NaN or infinite: the gradient overflowed) means the step was skipped: parameters,
    /// moments and [`Engine::steps`] are as they were (`rullama_kernels::ops::adamw::applies`).
    fn update(&mut self, lr: f64) -> Result<f64>;

    /// The gradients gathered since the last update, one per parameter (the checks of one
    /// engine against another).
    fn gradients(&self) -> Result<Vec<Matrix>>;

    /// The adapter's values (parameter `2i`: pair `i`'s `A`, `2i + 1` its `B`).
    fn params(&self) -> Result<Vec<Matrix>>;

    /// AdamW's state: moments and steps taken.
    fn optimizer(&self) -> Result<AdamW>;

    /// Optimizer steps applied (skipped ones not counted).
    fn steps(&self) -> u64;

    /// Replays the last step run with a GPU timestamp around every dispatch (a report of
    /// where its time goes; the replay adds its gradients again, so it is for benches);
    /// `None` where there is no device timer.
    fn profile(&mut self) -> Result<Option<StepProfile>> {
        Ok(None)
    }

    /// The kernel of each dispatch of the last step run, in order: what the lowering made
    /// of the graph (`tests/gpu_dispatches.rs` counts them). Empty where the engine builds
    /// no steps of kernels.
    fn step_kernels(&self) -> Vec<Kernel> {
        Vec::new()
    }

    /// Bytes the engine holds on its device (weights, parameters, optimizer state and the
    /// largest built step's buffers); `None` where it computes on the host.
    fn device_bytes(&self) -> Option<u64> {
        None
    }

    /// Puts back a checkpoint's parameters and optimizer state (shapes as
    /// [`Engine::params`]'s).
    fn restore(&mut self, params: Vec<Matrix>, opt: AdamW) -> Result<()>;
}

/// A backend a model can be trained on: it knows the adapter's matrices as parameters, and
/// makes the [`Engine`] that trains them.
pub trait TrainBackend: Backend + Sized {
    /// The handle of trainable matrix `id` for the graph's products: multiplied by `scale`
    /// wherever it is used, its input dropped out with probability `dropout` in training
    /// steps.
    fn param(id: usize, scale: f64, dropout: f64) -> Self::Weight;

    /// An engine over `model` (its adapter's parameters set as [`TrainBackend::param`]s)
    /// for sequences of at most `n_ctx` tokens, starting from `params` with zero moments.
    fn engine<'m>(
        model: &'m Model<Self>,
        params: Vec<Matrix>,
        optim: AdamWConfig,
        n_ctx: usize,
    ) -> Result<Box<dyn Engine + 'm>>;
}
