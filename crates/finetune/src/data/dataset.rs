//! A dataset ready for batching: every example tokenized, masked and cut to the context, the
//! ones with nothing to learn dropped, and an eval split.

use std::io::BufRead;
use std::path::{Path, PathBuf};

use super::encode::Encoder;
use super::error::{DataError, Result};
use super::jsonl::{self, Record};
use super::sequence::Sequence;
use super::shuffle::{permutation, stream_seed};
use super::summary::Summary;

/// The stream of the seed that picks eval examples (epochs use 0, 1, 2, …).
const EVAL_STREAM: u64 = u64::MAX;

/// Tokenized sequences, each at most the context long and with at least one trainable token.
#[derive(Debug, Clone)]
pub struct Dataset {
    path: PathBuf,
    sequences: Vec<Sequence>,
    summary: Summary,
}

impl Dataset {
    /// Read the JSONL file at `path` and tokenize it for a context of `ctx` tokens.
    pub fn load(path: &Path, encoder: &Encoder<'_>, ctx: usize) -> Result<Dataset> {
        check_ctx(ctx)?;
        Dataset::from_records(path, &jsonl::read_file(path)?, encoder, ctx)
    }

    /// [`Dataset::load`] of JSONL text from `reader`; `path` names it in errors.
    pub fn read(
        reader: impl BufRead,
        path: &Path,
        encoder: &Encoder<'_>,
        ctx: usize,
    ) -> Result<Dataset> {
        check_ctx(ctx)?;
        Dataset::from_records(path, &jsonl::read(reader, path)?, encoder, ctx)
    }

    /// Tokenize `records` (read from `path`) and cut them to `ctx` tokens. An error if there
    /// is no record, or no trainable token in any.
    pub fn from_records(
        path: &Path,
        records: &[Record],
        encoder: &Encoder<'_>,
        ctx: usize,
    ) -> Result<Dataset> {
        check_ctx(ctx)?;
        let mut sequences = Vec::with_capacity(records.len());
        for record in records {
            let seq = encoder
                .encode(&record.example)
                .map_err(|problem| DataError::Line {
                    path: path.to_path_buf(),
                    line: record.line,
                    problem,
                })?;
            sequences.push(seq);
        }
        Dataset::from_sequences(path, sequences, ctx)
    }

    /// A dataset of already tokenized `sequences`, cut to `ctx` tokens, those with nothing
    /// trainable dropped; `path` names it in errors and reports.
    pub fn from_sequences(path: &Path, sequences: Vec<Sequence>, ctx: usize) -> Result<Dataset> {
        check_ctx(ctx)?;
        let path = path.to_path_buf();
        let examples = sequences.len();
        if examples == 0 {
            return Err(DataError::Empty { path });
        }
        let (mut dropped, mut dropped_cut) = (0, 0);
        let mut kept = Vec::with_capacity(examples);
        for mut seq in sequences {
            seq.cut_to(ctx);
            if seq.trainable() == 0 {
                dropped += 1;
                dropped_cut += seq.cut();
            } else {
                kept.push(seq);
            }
        }
        if kept.is_empty() {
            return Err(DataError::NoTrainable {
                path,
                examples,
                dropped,
            });
        }
        let summary = Summary::of(&kept, examples, dropped, dropped_cut);
        Ok(Dataset {
            path,
            sequences: kept,
            summary,
        })
    }

    /// Hold out `fraction` of the sequences (rounded, at least one, and at least one left to
    /// train on) for evaluation, chosen by `seed`; both parts keep the file's order. Returns
    /// (train, eval).
    pub fn split_eval(self, fraction: f64, seed: u64) -> Result<(Dataset, Dataset)> {
        if !(fraction > 0.0 && fraction < 1.0) {
            return Err(DataError::Setting(format!(
                "the eval fraction must be between 0 and 1 (exclusive), not {fraction}"
            )));
        }
        let n = self.sequences.len();
        if n < 2 {
            return Err(DataError::Setting(format!(
                "{}: {n} sequence cannot be split into training and eval data; give --eval a file",
                self.path.display()
            )));
        }
        let n_eval = ((n as f64 * fraction).round() as usize).clamp(1, n - 1);
        let mut is_eval = vec![false; n];
        for &i in &permutation(n, stream_seed(seed, EVAL_STREAM))[..n_eval] {
            is_eval[i] = true;
        }
        let (mut train, mut eval) = (Vec::new(), Vec::new());
        for (seq, is_eval) in self.sequences.into_iter().zip(is_eval) {
            if is_eval {
                eval.push(seq);
            } else {
                train.push(seq);
            }
        }
        let s = self.summary;
        let part = |sequences: Vec<Sequence>, examples, dropped, dropped_cut| Dataset {
            path: self.path.clone(),
            summary: Summary::of(&sequences, examples, dropped, dropped_cut),
            sequences,
        };
        // The dropped examples stay with the training part's report, where the user looks.
        let dropped_cut = s.tokens_cut - cut_tokens(&train) - cut_tokens(&eval);
        let eval = part(eval, n_eval, 0, 0);
        let train = part(train, s.examples - n_eval, s.dropped, dropped_cut);
        Ok((train, eval))
    }

    /// The file the data came from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The sequences, in the file's order.
    pub fn sequences(&self) -> &[Sequence] {
        &self.sequences
    }

    /// Sequences.
    pub fn len(&self) -> usize {
        self.sequences.len()
    }

    /// Whether there is no sequence (never true of a loaded dataset).
    pub fn is_empty(&self) -> bool {
        self.sequences.is_empty()
    }

    /// What loading did: examples, tokens, trainable tokens, cuts, drops.
    pub fn summary(&self) -> &Summary {
        &self.summary
    }

    /// A 64-bit FNV-1a hash of every sequence's tokens and mask, in order: a saved data
    /// position is only valid on the dataset with the same fingerprint.
    pub fn fingerprint(&self) -> u64 {
        let mut h = Fnv::default();
        h.u64(self.sequences.len() as u64);
        for seq in &self.sequences {
            h.u64(seq.len() as u64);
            for (&t, &m) in seq.tokens().iter().zip(seq.mask()) {
                h.u64(u64::from(t) << 1 | u64::from(m));
            }
        }
        h.0
    }
}

/// Tokens removed by cutting from `sequences`.
fn cut_tokens(sequences: &[Sequence]) -> usize {
    sequences.iter().map(Sequence::cut).sum()
}

/// The smallest context that holds a target: one token to read, one to predict.
fn check_ctx(ctx: usize) -> Result<()> {
    if ctx < 2 {
        return Err(DataError::Setting(format!(
            "the context must be at least 2 tokens, not {ctx}"
        )));
    }
    Ok(())
}

/// 64-bit FNV-1a over little-endian words.
#[derive(Debug)]
pub(super) struct Fnv(pub(super) u64);

impl Default for Fnv {
    fn default() -> Fnv {
        Fnv(0xCBF2_9CE4_8422_2325)
    }
}

impl Fnv {
    pub(super) fn u64(&mut self, v: u64) {
        for b in v.to_le_bytes() {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01B3);
        }
    }
}
