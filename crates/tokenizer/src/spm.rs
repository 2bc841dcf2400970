//! SentencePiece BPE as llama.cpp runs it (`llm_tokenizer_spm_session`).
//!
//! Start from one symbol per character; repeatedly merge the adjacent pair whose
//! concatenation is a token with the highest score (ties: the leftmost pair); stop when no
//! adjacent pair forms a token. A final symbol that is not a token (a character outside the
//! vocabulary) is spelled as byte tokens `<0xXX>`.
//!
//! Candidate pairs live in a binary heap and stale ones are skipped when popped, so a text of
//! n characters costs O(n log n) whatever it holds: a megabyte of one letter is no trap.
//! Symbols are contiguous slices of the input, so the text of a pair is a slice too and a
//! lookup allocates nothing.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use crate::vocab::Vocab;

/// A symbol: `text[start..start + len]`; `len == 0` once merged into its left neighbour.
#[derive(Debug, Clone, Copy)]
struct Symbol {
    start: usize,
    len: usize,
    prev: Option<usize>,
    next: Option<usize>,
}

/// A candidate merge of symbols `left` and `right`, valid while their lengths sum to `size`.
#[derive(Debug)]
struct Bigram {
    score: f32,
    left: usize,
    right: usize,
    size: usize,
}

impl Ord for Bigram {
    /// Highest score first, then leftmost, as llama.cpp's `llm_bigram_spm::comparator`.
    fn cmp(&self, other: &Self) -> Ordering {
        self.score
            .total_cmp(&other.score)
            .then_with(|| other.left.cmp(&self.left))
    }
}

impl PartialOrd for Bigram {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Bigram {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Bigram {}

/// Tokenize `text` (spaces already spelled U+2581), appending ids to `out`.
/// `byte_tokens[b]` is the token for byte `b` when no token covers a character.
pub fn tokenize(vocab: &Vocab, byte_tokens: &[Option<u32>; 256], text: &str, out: &mut Vec<u32>) {
    let mut symbols: Vec<Symbol> = Vec::with_capacity(text.len());
    for (i, (start, c)) in text.char_indices().enumerate() {
        symbols.push(Symbol {
            start,
            len: c.len_utf8(),
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
        let (l, r) = (symbols[left], symbols[right]);
        let size = l.len + r.len;
        if let Some(id) = vocab.id(&text[l.start..l.start + size]) {
            heap.push(Bigram {
                score: vocab.score(id),
                left,
                right,
                size,
            });
        }
    };
    for i in 1..symbols.len() {
        try_add(&mut heap, &symbols, i - 1, i);
    }

    while let Some(b) = heap.pop() {
        let (l, r) = (symbols[b.left], symbols[b.right]);
        if l.len == 0 || r.len == 0 || l.len + r.len != b.size {
            continue; // one side was merged since this pair was queued
        }
        symbols[b.left].len = b.size;
        symbols[b.left].next = r.next;
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
        let piece = &text[sym.start..sym.start + sym.len];
        match vocab.id(piece) {
            Some(id) => out.push(id),
            // Merged symbols are tokens by construction; only a lone character lands here.
            None => out.extend(piece.bytes().filter_map(|b| byte_tokens[b as usize])),
        }
        i = sym.next;
    }
}
