//! The merge loop that SentencePiece BPE and byte-level BPE share (llama.cpp's
//! `llm_tokenizer_spm_session` and `llm_tokenizer_bpe_session` run the same one): start from
//! one symbol per character, repeatedly merge the adjacent pair that ranks first (ties: the
//! leftmost pair), stop when no adjacent pair is a candidate. The two differ only in what
//! makes a pair a candidate and how candidates rank, which the caller says.
//!
//! Candidate pairs live in a binary heap and stale ones are skipped when popped, so a text of
//! n characters costs O(n log n) whatever it holds: a megabyte of one letter is no trap.
//! Symbols are contiguous slices of the text, so the text of a pair is a slice too and a
//! lookup allocates nothing.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// A symbol: `text[start..start + len]` (`len == 0` once merged into its left neighbour),
/// and its token where known.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Symbol {
    pub start: usize,
    pub len: usize,
    pub id: Option<u32>,
    prev: Option<usize>,
    next: Option<usize>,
}

impl Symbol {
    pub fn text<'a>(&self, text: &'a str) -> &'a str {
        &text[self.start..self.start + self.len]
    }
}

/// What merging a pair is worth: candidates of greater `priority` merge first. `merged`
/// carries the merged text's token where the caller already knows it (`None`: look it up).
pub(crate) struct Candidate<P> {
    pub priority: P,
    pub merged: Option<Option<u32>>,
}

/// A candidate merge of symbols `left` and `right`, valid while their lengths sum to `size`.
struct Bigram<P> {
    priority: P,
    left: usize,
    right: usize,
    size: usize,
    merged: Option<Option<u32>>,
}

impl<P: Ord> Ord for Bigram<P> {
    /// `BinaryHeap` pops the greatest: the highest priority, then the leftmost.
    fn cmp(&self, other: &Self) -> Ordering {
        self.priority
            .cmp(&other.priority)
            .then_with(|| other.left.cmp(&self.left))
    }
}

impl<P: Ord> PartialOrd for Bigram<P> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<P: Ord> PartialEq for Bigram<P> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl<P: Ord> Eq for Bigram<P> {}

/// Merges the characters of `text` as long as `candidate(left, right)` offers a pair; returns
/// the final symbols in order. `lookup` gives the token of a piece of text: each character's
/// at the start, and a merged pair's where its candidate did not say.
pub(crate) fn merge<P: Ord>(
    text: &str,
    lookup: impl Fn(&str) -> Option<u32>,
    candidate: impl Fn(&Symbol, &Symbol) -> Option<Candidate<P>>,
) -> Vec<Symbol> {
    let mut symbols: Vec<Symbol> = Vec::with_capacity(text.len());
    for (i, (start, c)) in text.char_indices().enumerate() {
        let len = c.len_utf8();
        symbols.push(Symbol {
            start,
            len,
            id: lookup(&text[start..start + len]),
            prev: i.checked_sub(1),
            next: Some(i + 1),
        });
    }
    let Some(last) = symbols.last_mut() else {
        return symbols;
    };
    last.next = None;

    let mut heap = BinaryHeap::with_capacity(symbols.len());
    let try_add = |heap: &mut BinaryHeap<Bigram<P>>, symbols: &[Symbol], left, right| {
        let (l, r) = (&symbols[left], &symbols[right]);
        if let Some(c) = candidate(l, r) {
            heap.push(Bigram {
                priority: c.priority,
                left,
                right,
                size: l.len + r.len,
                merged: c.merged,
            });
        }
    };
    for i in 1..symbols.len() {
        try_add(&mut heap, &symbols, i - 1, i);
    }

    while let Some(b) = heap.pop() {
        let (l, r) = (symbols[b.left], symbols[b.right]);
        // One side was merged since this pair was queued. Starts never move, so equal
        // lengths mean equal texts (llama.cpp compares the texts).
        if l.len == 0 || r.len == 0 || l.len + r.len != b.size {
            continue;
        }
        let merged = &mut symbols[b.left];
        merged.len = b.size;
        merged.next = r.next;
        merged.id = b
            .merged
            .unwrap_or_else(|| lookup(&text[l.start..l.start + b.size]));
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

    let mut live = Vec::new();
    let mut i = Some(0);
    while let Some(s) = i {
        live.push(symbols[s]);
        i = symbols[s].next;
    }
    live
}
