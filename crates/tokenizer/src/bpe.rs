//! Byte-level BPE as llama.cpp runs it (`llm_tokenizer_bpe_session`), on one pre-tokenized
//! word at a time (already spelled with GPT-2's byte characters).
//!
//! Start from one symbol per character; repeatedly merge the adjacent pair with the lowest
//! rank in `tokenizer.ggml.merges` (ties: the leftmost pair) until no pair has a rank. Each
//! final symbol is emitted as its token, or, if the vocabulary lacks it, as the tokens of
//! its single ASCII bytes (llama.cpp's fallback; bytes without a token are dropped).
//!
//! As for SPM, a heap with lazy deletion keeps a long word O(n log n).

use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, HashMap};

use rullama_gguf::Metadata;

use crate::error::Result;
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

#[derive(Debug, Clone, Copy)]
struct Symbol {
    start: usize,
    len: usize,
    id: Option<u32>,
    prev: Option<usize>,
    next: Option<usize>,
}

impl Symbol {
    fn text<'a>(&self, word: &'a str) -> &'a str {
        &word[self.start..self.start + self.len]
    }
}

#[derive(Debug, PartialEq, Eq)]
struct Bigram {
    rank: u32,
    left: usize,
    right: usize,
    size: usize,
    /// The merged token, when the merge table knew it (`None`: look it up).
    merged: Option<Option<u32>>,
}

impl Ord for Bigram {
    /// `BinaryHeap` pops the greatest: make that the lowest rank, then the leftmost.
    fn cmp(&self, other: &Self) -> Ordering {
        (Reverse(self.rank), Reverse(self.left)).cmp(&(Reverse(other.rank), Reverse(other.left)))
    }
}

impl PartialOrd for Bigram {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
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
    let mut symbols: Vec<Symbol> = Vec::with_capacity(word.len());
    for (i, (start, c)) in word.char_indices().enumerate() {
        let len = c.len_utf8();
        symbols.push(Symbol {
            start,
            len,
            id: vocab.id(&word[start..start + len]),
            prev: i.checked_sub(1),
            next: Some(i + 1),
        });
    }
    let Some(last) = symbols.last_mut() else {
        return;
    };
    last.next = None;

    let mut heap = BinaryHeap::with_capacity(symbols.len());
    let try_add = |heap: &mut BinaryHeap<Bigram>, symbols: &[Symbol], left: usize, right: usize| {
        let (l, r) = (&symbols[left], &symbols[right]);
        if let Some((rank, merged)) = merges.find(word, l, r) {
            heap.push(Bigram {
                rank,
                left,
                right,
                size: l.len + r.len,
                merged,
            });
        }
    };
    for i in 1..symbols.len() {
        try_add(&mut heap, &symbols, i - 1, i);
    }

    while let Some(b) = heap.pop() {
        let (l, r) = (symbols[b.left], symbols[b.right]);
        // Starts never move, so equal lengths mean equal texts: llama.cpp compares texts.
        if l.len == 0 || r.len == 0 || l.len + r.len != b.size {
            continue;
        }
        let merged = &mut symbols[b.left];
        merged.len = b.size;
        merged.next = r.next;
        merged.id = b
            .merged
            .unwrap_or_else(|| vocab.id(&word[l.start..l.start + b.size]));
        symbols[b.right].len = 0;
        if let Some(n) = r.next {
            symbols[n].prev = Some(b.left);
        }
        if let Some(p) = l.prev {
            try_add(&mut heap, &symbols, p, b.left);
        }
        if let Some(n) = r.next {
            try_add(&mut heap, &symbols, b.left, n);
        }
    }

    let mut i = Some(0);
    while let Some(s) = i {
        let sym = symbols[s];
        match sym.id {
            Some(id) => out.push(id),
            None => {
                let piece = sym.text(word);
                let ascii = piece.bytes().filter(u8::is_ascii);
                out.extend(ascii.filter_map(|b| vocab.id(char::from(b).encode_utf8(&mut [0; 4]))));
            }
        }
        i = sym.next;
    }
}
