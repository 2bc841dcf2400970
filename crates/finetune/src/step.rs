//! One sequence's part of a training step on the tape: forward, loss, backward.

use rullama_model::Session;

use crate::error::Result;
use crate::loss::{cross_entropy, cross_entropy_loss, targets};
use crate::tape::{Matrix, TapeBackend};

/// Runs `tokens` (one sequence, positions from 0) forward on the tape, takes
/// `weight ×` the summed cross-entropy of the tokens `mask` marks, and adds its gradient
/// to `grads` (one per parameter). Returns the weighted loss.
pub fn accumulate(
    session: &mut Session<'_, TapeBackend>,
    tokens: &[u32],
    mask: &[bool],
    weight: f32,
    grads: &mut [Matrix],
) -> Result<f64> {
    session.sequence_mut().clear();
    let logits = session.record_logits(tokens, 0)?;
    let tape = session.sequence_mut();
    let (loss, d_logits) = cross_entropy(tape.value(logits), &targets(tokens, mask), weight);
    tape.backward(logits, d_logits, grads);
    Ok(loss)
}

/// The loss alone (evaluation): as [`accumulate`] without the backward walk.
pub fn loss(
    session: &mut Session<'_, TapeBackend>,
    tokens: &[u32],
    mask: &[bool],
    weight: f32,
) -> Result<f64> {
    session.sequence_mut().clear();
    let logits = session.record_logits(tokens, 0)?;
    let tape = session.sequence_mut();
    Ok(cross_entropy_loss(
        tape.value(logits),
        &targets(tokens, mask),
        weight,
    ))
}
