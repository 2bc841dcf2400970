//! Generation that keeps the device busy: the steps feeding the next tokens are queued
//! before a token is read back.
//!
//! A submit and the read-back of a 4-byte id take ~0.6 ms on the H100, as long as a small
//! model's whole decode step, and the host records the next steps meanwhile. Where the
//! token is drawn on the device ([`PendingToken::Queued`]), [`Generator::next`] therefore
//! queues the next steps first, feeding each the token the one before draws where it lies
//! ([`StepInput::Drawn`]), and only then waits for the oldest id. It keeps the sequence's
//! [`QueueDepth::queued_draws`](crate::QueueDepth::queued_draws) queued (two submissions' worth), so the device always has a
//! submission behind the one waited for. The first submissions grow (1, 1, 2, .. steps, up
//! to a full one), so the device is not left with the first step alone while the host
//! records several, and the last steps go without waiting to fill a submission. The
//! sampler's random numbers are taken in the same order as one step at a time, so the
//! tokens are the same. Where the host draws (penalties and the other CPU-only samplers
//! need the accepted history), steps run one after the other.
//!
//! Stop conditions are the caller's and are seen a few steps late: [`Generator::finish`]
//! rewinds the cache past the steps queued ahead for tokens that were not kept (and the
//! sequence drops those it has not submitted).

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crate::backend::{Backend, PendingToken};
use crate::error::Result;
use crate::model::{Session, StepInput};
use crate::sampler::Sampler;

/// Tokens drawn one at a time after a prompt.
#[derive(Debug)]
pub struct Generator<'s, 'm, B: Backend> {
    session: &'s mut Session<'m, B>,
    /// The tokens being drawn, oldest (the next to return) first.
    pending: VecDeque<PendingToken>,
    /// Tokens still to queue.
    unqueued: usize,
    /// Positions the queued steps fill: the next token queued is fed at `fed`.
    fed: usize,
    /// Tokens asked for (`unqueued` of them not queued yet).
    n_predict: usize,
    /// Tokens returned so far.
    returned: usize,
    /// The last token returned, while no step feeding it is queued: one drawn on the host
    /// is fed when the next token is asked for, so a stop after it runs no step in vain and
    /// the time of each step falls in the call that returns its token.
    unfed: Option<u32>,
    /// Host time spent queueing steps (recording, encoding, submitting) and waiting for ids.
    times: HostTimes,
}

/// Why a generation stopped, as Ollama's `done_reason` says it ([`StopReason::as_str`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StopReason {
    /// The model drew an end-of-generation token (`"stop"`).
    EndOfGeneration,
    /// As many tokens as asked for (`n_predict`, `"length"`).
    Length,
    /// The context is full: no position is left to feed the last token (`"context"`;
    /// Ollama, which shifts its context instead, has no such reason).
    Context,
}

impl StopReason {
    /// `"stop"`, `"length"` or `"context"`.
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::EndOfGeneration => "stop",
            StopReason::Length => "length",
            StopReason::Context => "context",
        }
    }
}

/// Where a generator's host time went: a step costs the larger of its GPU time and its
/// queueing time once the two overlap.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct HostTimes {
    /// Recording, encoding and submitting steps.
    pub queue: Duration,
    /// Waiting for drawn ids to come back.
    pub wait: Duration,
}

impl<'s, 'm, B: Backend> Generator<'s, 'm, B> {
    /// Feeds `prompt` from cache position `start_pos` and queues the first draw; at most
    /// `n_predict` tokens follow.
    pub fn start(
        session: &'s mut Session<'m, B>,
        prompt: &[u32],
        start_pos: usize,
        n_predict: usize,
        sampler: &mut Sampler,
    ) -> Result<Generator<'s, 'm, B>> {
        let mut pending = VecDeque::new();
        if n_predict > 0 {
            pending.push_back(session.queue_sample(
                StepInput::Tokens(prompt),
                start_pos,
                sampler,
            )?);
            // The first token should not wait for the steps queued behind it.
            session.submit_queued()?;
        }
        Ok(Generator {
            session,
            pending,
            unqueued: n_predict.saturating_sub(1),
            fed: start_pos + prompt.len(),
            n_predict,
            returned: 0,
            unfed: None,
            times: HostTimes::default(),
        })
    }

    /// Takes the token of a step just queued at `fed`, and submits the steps the backend
    /// holds where the device should not wait for a full submission.
    fn push(&mut self, token: PendingToken) -> Result<()> {
        self.pending.push_back(token);
        self.unqueued -= 1;
        self.fed += 1;
        if self.submit_early() {
            self.session.submit_queued()?;
        }
        Ok(())
    }

    /// Whether the steps held for a submission should go now rather than when it is full.
    /// At the start the device has only the first step to run while the host records a
    /// whole submission (several times a small model's step): submissions of 1, 1, 2, 4, ..
    /// steps (the queued count a power of two, up to a full submission) keep it fed. A step
    /// queued with nothing before it has the device to itself, and at the end the last
    /// steps have no later ones to wait for.
    fn submit_early(&self) -> bool {
        let queued = self.n_predict - self.unqueued;
        let ramp =
            queued.is_power_of_two() && queued <= self.session.queue_depth().steps_per_submit();
        ramp || self.pending.len() == 1 || !self.may_queue()
    }

    /// Whether another step may be queued: tokens left to draw and room in the cache for
    /// the token it feeds.
    fn may_queue(&self) -> bool {
        self.unqueued > 0 && self.fed < self.session.n_ctx()
    }

    /// The next token, accepted by `sampler` (the same sampler on every call); `None` once
    /// `n_predict` tokens were returned or the context is full.
    pub fn next(&mut self, sampler: &mut Sampler) -> Result<Option<u32>> {
        let t0 = Instant::now();
        if self.pending.is_empty() {
            match self.unfed.take() {
                Some(token) if self.may_queue() => {
                    let next = self.session.queue_sample(
                        StepInput::Tokens(&[token]),
                        self.fed,
                        sampler,
                    )?;
                    self.push(next)?;
                }
                _ => return Ok(None),
            }
        }
        let depth = self.session.queue_depth().queued_draws();
        while self.pending.len() < depth
            && self.may_queue()
            && self.pending.back().is_some_and(PendingToken::is_queued)
        {
            let last = self.pending.back().expect("checked above");
            let ahead = self
                .session
                .queue_sample(StepInput::Drawn(last), self.fed, sampler)?;
            self.push(ahead)?;
        }
        let t1 = Instant::now();
        let oldest = self.pending.pop_front().expect("checked above");
        let token = self.session.take_token(oldest)?;
        let t2 = Instant::now();
        sampler.accept(token);
        self.returned += 1;
        if self.pending.is_empty() {
            self.unfed = Some(token);
        }
        self.times.queue += (t1 - t0) + t2.elapsed();
        self.times.wait += t2 - t1;
        Ok(Some(token))
    }

    /// Why [`Generator::next`] returned `None`: `n_predict` tokens were returned
    /// ([`StopReason::Length`]) or the context is full ([`StopReason::Context`]); `None`
    /// while it may still return tokens. An end-of-generation token is the caller's to see
    /// ([`StopReason::EndOfGeneration`]).
    pub fn stop_reason(&self) -> Option<StopReason> {
        if self.returned >= self.n_predict {
            Some(StopReason::Length)
        } else if self.pending.is_empty() && !self.may_queue() {
            Some(StopReason::Context)
        } else {
            None
        }
    }

    /// Host time spent so far.
    pub fn host_times(&self) -> HostTimes {
        self.times
    }

    /// Ends generation: the cache keeps the prompt and every token returned but the last
    /// (which, as in one-step-at-a-time generation, was never fed for keeps).
    pub fn finish(self) {
        let keep = self.fed - self.pending.len();
        self.session.rewind(keep);
    }
}
