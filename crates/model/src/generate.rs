//! Generation that keeps the device busy: the step feeding token t is queued before t is
//! read back.
//!
//! A submit and the read-back of a 4-byte id take ~0.6 ms on the H100, as long as a small
//! model's whole decode step, and the host records the next step meanwhile. Where the
//! token is drawn on the device ([`PendingToken::Queued`]), [`Generator::next`] therefore
//! queues the next step first, feeding it the token where it lies ([`Input::Drawn`]), and
//! only then waits for the id. The sampler's random numbers are taken in the same order as
//! one step at a time, so the tokens are the same. Where the host draws (penalties and the
//! other CPU-only samplers need the accepted history), steps run one after the other.
//!
//! Stop conditions are the caller's and are seen one step late: [`Generator::finish`]
//! rewinds the cache past the step queued ahead for a token that was not kept.

use std::time::{Duration, Instant};

use crate::backend::{Backend, PendingToken};
use crate::error::Result;
use crate::model::{Input, Session};
use crate::sampler::Sampler;

/// Tokens drawn one at a time after a prompt.
#[derive(Debug)]
pub struct Generator<'s, 'm, B: Backend> {
    session: &'s mut Session<'m, B>,
    /// The next token to return, being drawn.
    pending: Option<PendingToken>,
    /// Tokens still to return.
    left: usize,
    /// Where the next token returned goes in the cache when it is fed.
    next_pos: usize,
    /// Host time spent queueing steps (recording, encoding, submitting) and waiting for ids.
    times: HostTimes,
}

/// Where a generator's host time went: a step costs the larger of its GPU time and its
/// queueing time once the two overlap.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct HostTimes {
    pub queue: Duration,
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
        let pending = match n_predict {
            0 => None,
            _ => Some(session.queue_sample(Input::Tokens(prompt), start_pos, sampler)?),
        };
        Ok(Generator {
            session,
            pending,
            left: n_predict,
            next_pos: start_pos + prompt.len(),
            times: HostTimes::default(),
        })
    }

    /// The next token, accepted by `sampler` (the same sampler on every call); `None` once
    /// `n_predict` tokens were returned or the context is full.
    pub fn next(&mut self, sampler: &mut Sampler) -> Result<Option<u32>> {
        let Some(pending) = self.pending.take() else {
            return Ok(None);
        };
        self.left -= 1;
        let feed = self.left > 0 && self.next_pos < self.session.n_ctx();
        let t0 = Instant::now();
        if feed && pending.is_queued() {
            let ahead =
                self.session
                    .queue_sample(Input::Drawn(&pending), self.next_pos, sampler)?;
            self.pending = Some(ahead);
        }
        let t1 = Instant::now();
        let token = self.session.take_token(pending)?;
        let t2 = Instant::now();
        sampler.accept(token);
        if feed && self.pending.is_none() {
            let next =
                self.session
                    .queue_sample(Input::Tokens(&[token]), self.next_pos, sampler)?;
            self.pending = Some(next);
        }
        self.times.queue += (t1 - t0) + t2.elapsed();
        self.times.wait += t2 - t1;
        if feed {
            self.next_pos += 1;
        }
        Ok(Some(token))
    }

    /// Host time spent so far.
    pub fn host_times(&self) -> HostTimes {
        self.times
    }

    /// Ends generation: the cache keeps the prompt and every token returned but the last
    /// (which, as in one-step-at-a-time generation, was never fed for keeps).
    pub fn finish(self) {
        let keep = self.next_pos - usize::from(self.pending.is_some());
        self.session.rewind(keep);
    }
}
