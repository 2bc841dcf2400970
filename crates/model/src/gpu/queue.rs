//! A GPU sequence's queue of draws: where its sampling steps put their tokens and how the
//! ids come back, at the depth [`QueueDepth`] fixes.
//!
//! Each sampling step draws its token into one of the sequence's token slots (one u32 on
//! the device per step of a submission) and a step fed that token
//! ([`crate::StepInput::Drawn`]) reads it there, so consecutive decode steps chain on the
//! device without the host. Steps are held until a submission's worth is queued (or a
//! token of them is taken), then recorded into one compute pass of one submit, each id
//! copied into its own slot of a ring of staging buffers; a read waits only for the
//! submission that holds it.

use std::collections::VecDeque;

use rullama_kernels::{Dtype, Gpu, GpuTensor, ReadRing, Ticket};

use super::memory::{Counted, LiveBytes};
use crate::backend::QueueDepth;

/// A sampling step waiting for the others of its submission.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Held {
    /// The plan whose binding runs it.
    pub plan: u64,
    /// The binding's copy (and the token slot it draws into).
    pub copy: usize,
    /// Its place among the sequence's draws.
    pub seq: u64,
}

/// The draws of one sequence.
#[derive(Debug)]
pub(crate) struct DrawQueue {
    pub depth: QueueDepth,
    /// One token slot per step of a submission: a plan's copy `c` draws into slot `c`.
    pub tokens: Vec<GpuTensor>,
    /// The slot holding the token drawn last: the next step runs its plan's copy
    /// `last_draw + 1`, which reads it there.
    pub last_draw: usize,
    /// Staging for the drawn ids, [`QueueDepth::read_slots`] deep, so reads overlap the next
    /// steps.
    pub reads: ReadRing,
    /// Sampling steps queued so far (the last one's token is in `tokens[last_draw]`).
    pub queued: u64,
    /// Sampling steps prepared but not yet submitted (fewer than a submission).
    pub held: Vec<Held>,
    /// The read tickets of submitted draws, by sequence number, oldest first.
    pub tickets: VecDeque<(u64, Ticket)>,
    _bytes: Counted,
}

impl DrawQueue {
    pub fn new(gpu: &Gpu, depth: QueueDepth, live: &LiveBytes) -> DrawQueue {
        let tokens: Vec<GpuTensor> = (0..depth.steps_per_submit())
            .map(|_| GpuTensor::zeros(gpu, &[1], Dtype::U32))
            .collect();
        let reads = ReadRing::new(gpu, depth.read_slots(), 4);
        let bytes = tokens.iter().map(GpuTensor::bytes).sum::<u64>() + reads.total_bytes();
        DrawQueue {
            depth,
            tokens,
            last_draw: 0,
            reads,
            queued: 0,
            held: Vec::new(),
            tickets: VecDeque::new(),
            _bytes: Counted::new(live, bytes),
        }
    }

    /// The copy of a plan the next step runs: the one that reads the token drawn last.
    pub fn next_copy(&self) -> usize {
        (self.last_draw + 1) % self.tokens.len()
    }

    /// Records the tickets of submitted draws; tickets older than the ring are dead (their
    /// slots were reused) and are never read.
    pub fn submitted(&mut self, held: &[Held], tickets: Vec<Ticket>) {
        self.tickets.extend(held.iter().map(|h| h.seq).zip(tickets));
        while self.tickets.len() > self.depth.read_slots() {
            self.tickets.pop_front();
        }
    }

    /// Forgets the held steps: the next step reads the token drawn before the first of them.
    pub fn drop_held(&mut self) {
        if let Some(first) = self.held.first() {
            let n = self.tokens.len();
            self.last_draw = (first.copy + n - 1) % n;
        }
        self.held.clear();
    }
}
