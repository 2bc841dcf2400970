//! Batches in a seeded order, epoch after epoch, from a position a checkpoint can save.
//!
//! Each epoch visits every sequence once, in the order `permutation(n, stream_seed(seed,
//! epoch))` (or the file's order without shuffling), so the order of any epoch follows from
//! the seed alone. A batch takes the next sequences of that order:
//!
//! * padded: `batch` sequences, each a row, padded with the pad id to the longest of them;
//! * packed: rows of `ctx` tokens, each filled with the next sequences while the next one
//!   fits (never split: an example cut in two would lose its start), the rest padding;
//!   `batch` such rows. Every span records where its example lies, so attention and positions
//!   can restart per example ([`Span`]). Rows are filled in the epoch's order (next fit), not
//!   by best fit over the whole epoch as TRL's `bfd` packing does: a batch then depends only
//!   on where it starts, which is what resuming needs, at the cost of some padding.
//!
//! A batch never crosses an epoch's end: the last one of an epoch may have fewer rows. What a
//! batch holds depends only on where it starts, so the [`Position`] (epoch, index into the
//! epoch's order) is all a resumed run needs to see exactly the batches the first run would
//! have seen next.

use serde::{Deserialize, Serialize};

use super::batch::{Batch, Span};
use super::dataset::{Dataset, Fnv};
use super::error::{DataError, Result};
use super::shuffle::{permutation, stream_seed};

/// How sequences share a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Layout {
    /// One sequence a row, padded to the longest in the batch.
    Padded,
    /// Sequences back to back in rows of the context's length.
    Packed,
}

/// What a batch is made of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchConfig {
    /// Rows a batch.
    pub batch: usize,
    /// The context: a packed row's length (sequences are already at most this long).
    pub ctx: usize,
    /// Padded or packed.
    pub layout: Layout,
    /// The id written in padding (masked out of the loss; [`pad_id`] picks one).
    pub pad: u32,
    /// Shuffle each epoch (with `seed`), or keep the file's order.
    pub shuffle: bool,
    /// The seed of the epochs' orders.
    pub seed: u64,
}

/// The id to pad with: the tokenizer's pad token, else its EOS, else 0. Padding is masked out
/// of the loss and lies after every real token of its row, so causal attention never lets a
/// real token see it; the id only needs to be a valid embedding row.
pub fn pad_id(tokenizer: &rullama_tokenizer::Tokenizer) -> u32 {
    tokenizer.pad().or(tokenizer.eos()).unwrap_or(0)
}

/// Where the batch iterator stands: save it with a checkpoint, give it to
/// [`Batches::resume`] to continue with the same batches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Position {
    /// Epochs completed.
    pub epoch: u64,
    /// Sequences of this epoch's order already served.
    pub index: usize,
    /// The dataset and settings it belongs to ([`Dataset::fingerprint`] and the
    /// [`BatchConfig`]).
    pub fingerprint: u64,
}

/// An endless iterator of batches over a dataset: the caller stops after its steps or epochs
/// ([`Batches::position`] says how many epochs are complete). One pass over eval data is the
/// batches until `position().epoch` reaches 1, with `shuffle` off.
#[derive(Debug, Clone)]
pub struct Batches<'d> {
    data: &'d Dataset,
    config: BatchConfig,
    fingerprint: u64,
    epoch: u64,
    index: usize,
    order: Vec<usize>,
}

impl<'d> Batches<'d> {
    /// Batches from the start of epoch 0.
    pub fn new(data: &'d Dataset, config: BatchConfig) -> Result<Batches<'d>> {
        if data.is_empty() {
            return Err(DataError::Empty {
                path: data.path().to_path_buf(),
            });
        }
        if config.batch == 0 {
            return Err(DataError::Setting(
                "the batch must hold at least one row".into(),
            ));
        }
        if let Some(long) = data.sequences().iter().find(|s| s.len() > config.ctx) {
            return Err(DataError::Setting(format!(
                "a sequence of {} tokens is longer than the context of {}: load the dataset \
                 with the same context",
                long.len(),
                config.ctx
            )));
        }
        let mut fnv = Fnv(data.fingerprint());
        fnv.u64(config.batch as u64);
        fnv.u64(config.ctx as u64);
        fnv.u64(config.layout as u64);
        fnv.u64(u64::from(config.pad));
        fnv.u64(u64::from(config.shuffle));
        fnv.u64(config.seed);
        let mut batches = Batches {
            data,
            config,
            fingerprint: fnv.0,
            epoch: 0,
            index: 0,
            order: Vec::new(),
        };
        batches.order = batches.order_of(0);
        Ok(batches)
    }

    /// Batches from `position`, saved by a run over the same dataset with the same settings
    /// (else [`DataError::PositionMismatch`]).
    pub fn resume(
        data: &'d Dataset,
        config: BatchConfig,
        position: Position,
    ) -> Result<Batches<'d>> {
        let mut batches = Batches::new(data, config)?;
        if position.fingerprint != batches.fingerprint || position.index > data.len() {
            return Err(DataError::PositionMismatch {
                saved: position.fingerprint,
                current: batches.fingerprint,
            });
        }
        // An index at the end of an epoch is the start of the next.
        let at_end = position.index == data.len();
        batches.epoch = position.epoch + u64::from(at_end);
        batches.index = if at_end { 0 } else { position.index };
        batches.order = batches.order_of(batches.epoch);
        Ok(batches)
    }

    /// Where the next batch starts.
    pub fn position(&self) -> Position {
        Position {
            epoch: self.epoch,
            index: self.index,
            fingerprint: self.fingerprint,
        }
    }

    /// The settings.
    pub fn config(&self) -> &BatchConfig {
        &self.config
    }

    /// Batches in epoch `epoch`: `ceil(n / batch)` when padding; when packing it depends on
    /// how that epoch's order fills the rows.
    pub fn batches_in_epoch(&self, epoch: u64) -> usize {
        let mut probe = Batches {
            order: self.order_of(epoch),
            epoch,
            index: 0,
            ..self.clone()
        };
        let mut n = 0;
        while probe.index < self.data.len() {
            probe.plan();
            n += 1;
        }
        n
    }

    /// The next batch.
    pub fn next_batch(&mut self) -> Batch {
        let batch = self.take();
        if self.index == self.data.len() {
            self.epoch += 1;
            self.index = 0;
            self.order = self.order_of(self.epoch);
        }
        batch
    }

    /// The batch at the current index of the current order, advancing the index only.
    fn take(&mut self) -> Batch {
        let rows = self.plan();
        self.assemble(&rows)
    }

    /// The rows (dataset indices) of the batch at the current index, advancing the index.
    fn plan(&mut self) -> Vec<Vec<usize>> {
        let mut rows: Vec<Vec<usize>> = Vec::new();
        let n = self.data.len();
        let seqs = self.data.sequences();
        while rows.len() < self.config.batch && self.index < n {
            let mut row = vec![self.order[self.index]];
            self.index += 1;
            if self.config.layout == Layout::Packed {
                let mut used = seqs[row[0]].len();
                while self.index < n && used + seqs[self.order[self.index]].len() <= self.config.ctx
                {
                    used += seqs[self.order[self.index]].len();
                    row.push(self.order[self.index]);
                    self.index += 1;
                }
            }
            rows.push(row);
        }
        rows
    }

    /// Lay out rows of dataset indices as a batch.
    fn assemble(&self, rows: &[Vec<usize>]) -> Batch {
        let seqs = self.data.sequences();
        let row_len = |row: &Vec<usize>| row.iter().map(|&i| seqs[i].len()).sum::<usize>();
        let width = match self.config.layout {
            Layout::Packed => self.config.ctx,
            Layout::Padded => rows.iter().map(row_len).max().unwrap_or(0),
        };
        let mut batch = Batch {
            rows: rows.len(),
            width,
            tokens: vec![self.config.pad; rows.len() * width],
            mask: vec![false; rows.len() * width],
            spans: Vec::with_capacity(rows.len()),
            examples: Vec::new(),
        };
        for (r, row) in rows.iter().enumerate() {
            let mut start = 0;
            let mut spans = Vec::with_capacity(row.len());
            for &i in row {
                let seq = &seqs[i];
                let at = r * width + start;
                batch.tokens[at..at + seq.len()].copy_from_slice(seq.tokens());
                batch.mask[at..at + seq.len()].copy_from_slice(seq.mask());
                spans.push(Span {
                    start,
                    len: seq.len(),
                });
                batch.examples.push(i);
                start += seq.len();
            }
            batch.spans.push(spans);
        }
        batch
    }

    /// The order of `epoch`.
    fn order_of(&self, epoch: u64) -> Vec<usize> {
        let n = self.data.len();
        if self.config.shuffle {
            permutation(n, stream_seed(self.config.seed, epoch))
        } else {
            (0..n).collect()
        }
    }
}

impl Iterator for Batches<'_> {
    type Item = Batch;

    /// Never `None`: the batches go on epoch after epoch.
    fn next(&mut self) -> Option<Batch> {
        Some(self.next_batch())
    }
}
