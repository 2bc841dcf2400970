//! What loading a dataset did: the figures a user should see before training starts.

use std::fmt;

use super::sequence::Sequence;

/// Counts over a dataset's examples and sequences.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Summary {
    /// Examples read from the file (blank lines are not examples).
    pub examples: usize,
    /// Sequences kept: examples less those dropped.
    pub sequences: usize,
    /// Tokens in the kept sequences, after cutting.
    pub tokens: usize,
    /// Tokens the loss counts.
    pub trainable: usize,
    /// Sequences that were longer than the context and cut.
    pub cut: usize,
    /// Tokens removed by cutting, kept sequences and dropped ones together.
    pub tokens_cut: usize,
    /// The longest example before cutting, in tokens.
    pub longest: usize,
    /// Examples dropped because no trainable token was left (a prompt that fills the
    /// context, a conversation without an assistant turn, an empty completion with no EOS).
    pub dropped: usize,
}

impl Summary {
    /// The counts of `kept` sequences out of `examples`, `dropped` ones having removed
    /// `dropped_cut` tokens by cutting.
    pub fn of(kept: &[Sequence], examples: usize, dropped: usize, dropped_cut: usize) -> Summary {
        let mut s = Summary {
            examples,
            sequences: kept.len(),
            dropped,
            tokens_cut: dropped_cut,
            ..Summary::default()
        };
        for seq in kept {
            s.tokens += seq.len();
            s.trainable += seq.trainable();
            s.cut += usize::from(seq.cut() > 0);
            s.tokens_cut += seq.cut();
            s.longest = s.longest.max(seq.len() + seq.cut());
        }
        s
    }
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} examples: {} sequences, {} tokens, {} trainable",
            self.examples, self.sequences, self.tokens, self.trainable
        )?;
        if self.cut > 0 {
            write!(
                f,
                "; {} cut to the context ({} tokens removed, longest {})",
                self.cut, self.tokens_cut, self.longest
            )?;
        }
        if self.dropped > 0 {
            write!(f, "; {} dropped with nothing to learn", self.dropped)?;
        }
        Ok(())
    }
}
