//! The last N accepted tokens and how often each occurs among them, kept incrementally as
//! llama.cpp's penalties sampler does (a ring plus a count map), so a penalty pass touches
//! only the distinct recent tokens, not the vocabulary.

use std::collections::{HashMap, VecDeque};

/// Tokens a history has room for before it grows: llama.cpp's default window (64) and more,
/// so the usual settings never reallocate.
const PREALLOCATED: usize = 4096;

#[derive(Debug, Clone, Default)]
pub(super) struct History {
    window: usize,
    recent: VecDeque<u32>,
    counts: HashMap<u32, u32>,
}

impl History {
    /// `window` 0 remembers nothing (penalties off). Any window is accepted: the buffers
    /// start at most [`PREALLOCATED`] long and grow with the tokens pushed, so a window far
    /// longer than any context (`--repeat-last-n 10000000000`) costs no more than the
    /// tokens it holds.
    pub(super) fn new(window: usize) -> Self {
        let capacity = window.min(PREALLOCATED);
        Self {
            window,
            recent: VecDeque::with_capacity(capacity),
            counts: HashMap::with_capacity(capacity),
        }
    }

    pub(super) fn push(&mut self, token: u32) {
        if self.window == 0 {
            return;
        }
        if self.recent.len() >= self.window {
            let oldest = self.recent.pop_front();
            if let Some(old) = oldest {
                self.forget(old);
            }
        }
        self.recent.push_back(token);
        *self.counts.entry(token).or_insert(0) += 1;
    }

    fn forget(&mut self, token: u32) {
        if let Some(n) = self.counts.get_mut(&token) {
            *n -= 1;
            if *n == 0 {
                self.counts.remove(&token);
            }
        }
    }

    pub(super) fn clear(&mut self) {
        self.recent.clear();
        self.counts.clear();
    }

    pub(super) fn is_empty(&self) -> bool {
        self.recent.is_empty()
    }

    /// (token, occurrences in the window), each distinct token once.
    pub(super) fn counts(&self) -> impl Iterator<Item = (u32, u32)> + '_ {
        self.counts.iter().map(|(&t, &n)| (t, n))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sorted_counts(h: &History) -> Vec<(u32, u32)> {
        let mut v: Vec<_> = h.counts().collect();
        v.sort_unstable();
        v
    }

    #[test]
    fn keeps_only_the_window() {
        let mut h = History::new(3);
        for t in [5, 5, 7, 9] {
            h.push(t);
        }
        // The first 5 fell out of the window.
        assert_eq!(sorted_counts(&h), [(5, 1), (7, 1), (9, 1)]);
        h.push(9);
        assert_eq!(sorted_counts(&h), [(7, 1), (9, 2)]);
        h.clear();
        assert!(h.is_empty());
    }

    /// A window of 10^10 tokens allocates for what is pushed, not for the window.
    #[test]
    fn a_huge_window_allocates_only_what_it_holds() {
        let mut h = History::new(usize::try_from(10_000_000_000u64).unwrap_or(usize::MAX));
        assert!(h.recent.capacity() <= PREALLOCATED);
        for t in 0..10 {
            h.push(t);
        }
        assert_eq!(h.counts().count(), 10);
    }

    #[test]
    fn zero_window_remembers_nothing() {
        let mut h = History::new(0);
        h.push(1);
        assert!(h.is_empty());
    }
}
