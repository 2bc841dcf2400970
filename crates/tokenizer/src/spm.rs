//! SentencePiece BPE as llama.cpp runs it (`llm_tokenizer_spm_session`).
//!
//! Start from one symbol per character; repeatedly merge the adjacent pair whose
//! concatenation is a token with the highest score (ties: the leftmost pair); stop when no
//! adjacent pair forms a token. A final symbol that is not a token (a character outside the
//! vocabulary) is spelled as byte tokens `<0xXX>`.
//!
//! The loop itself is `merge.rs`'s, shared with byte-level BPE.

use std::cmp::Ordering;

use crate::merge::{Candidate, Symbol, merge};
use crate::vocab::Vocab;

/// A token's score, ordered by `total_cmp`: the higher merges first.
#[derive(Debug, Clone, Copy)]
struct Score(f32);

impl Ord for Score {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.total_cmp(&other.0)
    }
}

impl PartialOrd for Score {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Score {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Score {}

/// Tokenize `text` (spaces already spelled U+2581), appending ids to `out`.
/// `byte_tokens[b]` is the token for byte `b` when no token covers a character.
pub fn tokenize(vocab: &Vocab, byte_tokens: &[Option<u32>; 256], text: &str, out: &mut Vec<u32>) {
    // A pair is a candidate when its text is a token; the highest score merges first.
    let candidate = |l: &Symbol, r: &Symbol| {
        let id = vocab.id(&text[l.start..l.start + l.len + r.len])?;
        Some(Candidate {
            priority: Score(vocab.score(id)),
            merged: Some(Some(id)),
        })
    };
    for sym in merge(text, |piece| vocab.id(piece), candidate) {
        match sym.id {
            Some(id) => out.push(id),
            // Merged symbols are tokens by construction; only a lone character lands here.
            None => out.extend(
                sym.text(text)
                    .bytes()
                    .filter_map(|b| byte_tokens[b as usize]),
            ),
        }
    }
}
