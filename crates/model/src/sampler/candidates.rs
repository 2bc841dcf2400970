//! The list every stage filters: (token id, logit, probability), as llama.cpp's
//! `llama_token_data_array`, with its `sorted` flag so a stage after a sorting one does not
//! sort again.

use std::cmp::Ordering;

use super::SamplerError;

/// One token still in the running. `p` is only meaningful right after a stage that computed
/// a softmax (and in what [`Sampler::distribution`](super::Sampler::distribution) returns).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Candidate {
    /// The token.
    pub id: u32,
    /// Its logit after the stages so far (temperature, penalties).
    pub logit: f32,
    /// Its probability among the candidates left.
    pub p: f32,
}

/// Invariant: no logit is NaN (NaN becomes -inf on the way in and after every stage that
/// could make one), so [`desc`] is a total order and the std sorts never see an inconsistent
/// comparison.
#[derive(Debug, Clone, Default)]
pub struct Candidates {
    items: Vec<Candidate>,
    /// Items are in [`desc`] order.
    sorted: bool,
}

/// Descending logit, ties to the lower id: the order of "best first" everywhere, so that
/// top-k with k = 1 picks the same token as greedy.
pub(super) fn desc(a: &Candidate, b: &Candidate) -> Ordering {
    key(b.logit).total_cmp(&key(a.logit)).then(a.id.cmp(&b.id))
}

/// `total_cmp` orders -0.0 below +0.0; adding +0.0 maps -0.0 to +0.0 so equal logits tie.
fn key(logit: f32) -> f32 {
    logit + 0.0
}

/// NaN counts as -inf: a broken logit must never be drawn, and must not poison sorts.
pub(super) fn sanitize(logit: f32) -> f32 {
    if logit.is_nan() {
        f32::NEG_INFINITY
    } else {
        logit
    }
}

/// exp(l - max), exact at l == max so that +inf logits (max = +inf) share the mass instead
/// of producing inf - inf = NaN.
fn shifted_exp(logit: f32, max: f32) -> f32 {
    if logit == max {
        1.0
    } else {
        (logit - max).exp()
    }
}

impl Candidates {
    /// Every token of `logits`, in id order, as the first stage sees them (tests build
    /// stage inputs this way; the sampler refills one list with [`Self::fill`]).
    #[cfg(test)]
    pub(super) fn from_logits(logits: &[f32]) -> Result<Self, SamplerError> {
        let mut c = Self::default();
        c.fill(logits)?;
        Ok(c)
    }

    /// Refills from `logits`, reusing the allocation (a 262k vocabulary is 3 MiB of candidates:
    /// allocating it per token would cost page faults on every step).
    pub(super) fn fill(&mut self, logits: &[f32]) -> Result<(), SamplerError> {
        if logits.is_empty() {
            return Err(SamplerError::EmptyLogits);
        }
        if u32::try_from(logits.len()).is_err() {
            return Err(SamplerError::VocabTooLarge { len: logits.len() });
        }
        self.items.clear();
        self.items
            .extend(logits.iter().enumerate().map(|(i, &l)| Candidate {
                id: i as u32,
                logit: sanitize(l),
                p: 0.0,
            }));
        self.sorted = false;
        if self.max_logit() == f32::NEG_INFINITY {
            return Err(SamplerError::NoFiniteLogits);
        }
        Ok(())
    }

    pub fn items(&self) -> &[Candidate] {
        &self.items
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    pub fn is_sorted(&self) -> bool {
        self.sorted
    }

    /// For stages that rewrite logits: they must keep them NaN-free (see [`sanitize`]) and
    /// clear the sorted flag themselves if they can reorder.
    pub(super) fn items_mut(&mut self) -> &mut [Candidate] {
        &mut self.items
    }

    pub(super) fn set_unsorted(&mut self) {
        self.sorted = false;
    }

    /// Keeps the first `n`; a sorted list stays sorted.
    pub(super) fn truncate(&mut self, n: usize) {
        self.items.truncate(n);
    }

    /// Keeps the items for which `keep` holds, in their current order.
    pub(super) fn retain(&mut self, keep: impl FnMut(&Candidate) -> bool) {
        self.items.retain(keep);
    }

    /// Drops the first `n` (XTC removes the most probable tokens).
    pub(super) fn drop_front(&mut self, n: usize) {
        self.items.drain(..n.min(self.items.len()));
    }

    /// Keeps the single candidate at `index` (greedy), without giving up the allocation.
    pub(super) fn keep_only(&mut self, index: usize) {
        if index < self.items.len() {
            self.items.swap(0, index);
            self.items.truncate(1);
            self.sorted = true;
        }
    }

    /// Replaces the list with `items` in the given order (typical-p reorders by its score),
    /// keeping the allocation.
    pub(super) fn replace(&mut self, items: &[Candidate], sorted: bool) {
        self.items.clear();
        self.items.extend_from_slice(items);
        self.sorted = sorted;
    }

    pub(super) fn max_logit(&self) -> f32 {
        if self.sorted {
            return self.items.first().map_or(f32::NEG_INFINITY, |c| c.logit);
        }
        self.items
            .iter()
            .fold(f32::NEG_INFINITY, |m, c| m.max(c.logit))
    }

    /// Index of the best candidate (highest logit, ties to the lowest id), whatever the order.
    pub(super) fn argmax(&self) -> Option<usize> {
        let mut best: Option<usize> = None;
        for (i, c) in self.items.iter().enumerate() {
            if best.is_none_or(|b| desc(c, &self.items[b]) == Ordering::Less) {
                best = Some(i);
            }
        }
        best
    }

    /// Sorts the whole list best first.
    pub(super) fn sort(&mut self) {
        if !self.sorted {
            self.items.sort_unstable_by(desc);
            self.sorted = true;
        }
    }

    /// Moves the best `k` to the front, in order, leaving the rest unordered behind them:
    /// partial selection (O(n)) then a sort of `k`, instead of sorting a whole vocabulary.
    pub(super) fn sort_prefix(&mut self, k: usize) {
        if !self.sorted {
            self.extend_sorted_prefix(0, k);
        }
    }

    /// With `items[..from]` already the best `from`, in order, makes `items[..to]` the best
    /// `to`, in order, by selecting and sorting only `items[from..to]`. Growing a prefix
    /// geometrically this way costs a few O(n) selections instead of an O(n log n) sort.
    pub(super) fn extend_sorted_prefix(&mut self, from: usize, to: usize) {
        let len = self.items.len();
        let to = to.min(len);
        if from >= to {
            return;
        }
        let rest = &mut self.items[from..];
        if to < len {
            rest.select_nth_unstable_by(to - from - 1, desc);
        }
        rest[..to - from].sort_unstable_by(desc);
        if to == len {
            self.sorted = true;
        }
    }

    /// Marks the list sorted after a stage has kept only a sorted prefix.
    pub(super) fn set_sorted(&mut self) {
        self.sorted = true;
    }

    /// Fills `p` with the softmax of the logits. Returns false when there is nothing with a
    /// nonzero probability (empty, or every logit -inf); every `p` is then 0.
    pub(super) fn softmax(&mut self) -> bool {
        let max = self.max_logit();
        if max == f32::NEG_INFINITY {
            self.items.iter_mut().for_each(|c| c.p = 0.0);
            return false;
        }
        // f64 sum: 262k terms in f32 lose the small ones.
        let mut sum = 0.0f64;
        for c in &mut self.items {
            c.p = shifted_exp(c.logit, max);
            sum += f64::from(c.p);
        }
        // sum >= 1: the max itself contributes exactly 1.
        let inv = (1.0 / sum) as f32;
        self.items.iter_mut().for_each(|c| c.p *= inv);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(c: &Candidates) -> Vec<u32> {
        c.items().iter().map(|c| c.id).collect()
    }

    #[test]
    fn nan_becomes_neg_inf_and_all_bad_is_an_error() {
        let c = Candidates::from_logits(&[f32::NAN, 1.0]).unwrap();
        assert_eq!(c.items()[0].logit, f32::NEG_INFINITY);
        assert_eq!(
            Candidates::from_logits(&[f32::NAN, f32::NEG_INFINITY]).unwrap_err(),
            SamplerError::NoFiniteLogits
        );
        assert_eq!(
            Candidates::from_logits(&[]).unwrap_err(),
            SamplerError::EmptyLogits
        );
    }

    #[test]
    fn order_is_logit_desc_then_id_asc() {
        let mut c = Candidates::from_logits(&[1.0, 3.0, -0.0, 3.0, 0.0]).unwrap();
        c.sort();
        assert_eq!(ids(&c), [1, 3, 0, 2, 4]);
        assert_eq!(c.argmax(), Some(0));
    }

    #[test]
    fn growing_a_sorted_prefix_ends_in_a_full_sort() {
        let logits: Vec<f32> = (0..100).map(|i| ((i * 37) % 101) as f32).collect();
        let mut a = Candidates::from_logits(&logits).unwrap();
        let mut b = a.clone();
        b.sort();
        a.sort_prefix(10);
        assert!(!a.is_sorted());
        assert_eq!(ids(&a)[..10], ids(&b)[..10]);
        a.extend_sorted_prefix(10, 40);
        assert_eq!(ids(&a)[..40], ids(&b)[..40]);
        a.extend_sorted_prefix(40, 1000);
        assert!(a.is_sorted());
        assert_eq!(ids(&a), ids(&b));
    }

    #[test]
    fn softmax_sums_to_one_and_handles_infinities() {
        let mut c = Candidates::from_logits(&[0.0, (2.0f32).ln(), f32::NEG_INFINITY]).unwrap();
        assert!(c.softmax());
        let p: Vec<f32> = c.items().iter().map(|c| c.p).collect();
        assert!((p[0] - 1.0 / 3.0).abs() < 1e-6 && (p[1] - 2.0 / 3.0).abs() < 1e-6);
        assert_eq!(p[2], 0.0);

        let mut c = Candidates::from_logits(&[f32::INFINITY, 5.0, f32::INFINITY]).unwrap();
        assert!(c.softmax());
        let p: Vec<f32> = c.items().iter().map(|c| c.p).collect();
        assert_eq!(p, [0.5, 0.0, 0.5]);
    }
}
