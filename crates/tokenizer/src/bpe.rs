//! Byte-level BPE as llama.cpp runs it (`llm_tokenizer_bpe_session`), on one pre-tokenized
//! word at a time (already spelled with GPT-2's byte characters).
//!
//! Start from one symbol per character; repeatedly merge the adjacent pair with the lowest
//! rank in `tokenizer.ggml.merges` (ties: the leftmost pair) until no pair has a rank. Each
//! final symbol is emitted as its token, or, if the vocabulary lacks it, as the tokens of
//! its single ASCII bytes (llama.cpp's fallback; bytes without a token are dropped).
//!
//! The loop itself is `merge.rs`'s, shared with SentencePiece BPE.

use std::cmp::Reverse;
use std::collections::HashMap;

use rullama_gguf::Metadata;

use crate::error::Result;
use crate::merge::{Candidate, Symbol, merge};
use crate::vocab::Vocab;

pub const KEY_MERGES: &str = "tokenizer.ggml.merges";

/// Merge ranks. Nearly every merge joins two tokens, so ranks are keyed by the two ids, with
/// the id of the merged text looked up once here rather than at every merge; a merge naming
/// a string outside the vocabulary goes to a second, string-keyed map.
#[derive(Debug, Clone, Default)]
pub struct Merges {
    by_id: HashMap<(u32, u32), Merge>,
    by_text: HashMap<(Box<str>, Box<str>), u32>,
}

#[derive(Debug, Clone, Copy)]
struct Merge {
    rank: u32,
    /// The token of the merged text, `None` if the vocabulary lacks it.
    id: Option<u32>,
}

impl Merges {
    pub fn from_metadata(md: &Metadata, vocab: &Vocab) -> Result<Merges> {
        let lines = md.get_str_array(KEY_MERGES)?;
        let mut merges = Merges {
            by_id: HashMap::with_capacity(lines.len()),
            by_text: HashMap::new(),
        };
        for (rank, line) in lines.iter().enumerate() {
            let rank = u32::try_from(rank).unwrap_or(u32::MAX);
            // llama.cpp splits at the first space after the first byte; no space: ("", "").
            let (left, right) = match line.as_bytes().iter().skip(1).position(|&b| b == b' ') {
                Some(i) => (&line[..i + 1], &line[i + 2..]),
                None => ("", ""),
            };
            // The first occurrence of a pair keeps its rank.
            match (vocab.id(left), vocab.id(right)) {
                (Some(l), Some(r)) => {
                    merges.by_id.entry((l, r)).or_insert_with(|| Merge {
                        rank,
                        id: vocab.id(&format!("{left}{right}")),
                    });
                }
                _ => {
                    merges
                        .by_text
                        .entry((left.into(), right.into()))
                        .or_insert(rank);
                }
            }
        }
        Ok(merges)
    }

    /// The rank of merging `l` and `r`, and the merged token if already known.
    fn find(&self, word: &str, l: &Symbol, r: &Symbol) -> Option<(u32, Option<Option<u32>>)> {
        if let (Some(a), Some(b)) = (l.id, r.id) {
            return self.by_id.get(&(a, b)).map(|m| (m.rank, Some(m.id)));
        }
        if self.by_text.is_empty() {
            return None;
        }
        let key = (l.text(word).into(), r.text(word).into());
        self.by_text.get(&key).map(|&rank| (rank, None))
    }
}

/// Tokenize one byte-encoded `word`, appending ids to `out`.
pub fn tokenize_word(
    vocab: &Vocab,
    merges: &Merges,
    ignore_merges: bool,
    word: &str,
    out: &mut Vec<u32>,
) {
    let whole = if ignore_merges { vocab.id(word) } else { None };
    if let Some(id) = whole {
        out.push(id);
        return;
    }
    // A pair is a candidate when the merge table ranks it; the lowest rank merges first.
    let candidate = |l: &Symbol, r: &Symbol| {
        let (rank, merged) = merges.find(word, l, r)?;
        Some(Candidate {
            priority: Reverse(rank),
            merged,
        })
    };
    for sym in merge(word, |piece| vocab.id(piece), candidate) {
        match sym.id {
            Some(id) => out.push(id),
            None => {
                let ascii = sym.text(word).bytes().filter(u8::is_ascii);
                out.extend(ascii.filter_map(|b| vocab.id(char::from(b).encode_utf8(&mut [0; 4]))));
            }
        }
    }
}
