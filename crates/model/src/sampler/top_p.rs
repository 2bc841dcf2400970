//! Top-p (nucleus), as llama.cpp's `llama_sampler_top_p_apply`: softmax over the current
//! candidates, then keep the smallest best-first prefix whose cumulative probability reaches
//! `p`, and at least `min_keep`. `p >= 1` is off.
//!
//! A large unsorted vocabulary is not fully sorted: one pass buckets the probability mass by
//! logit (as llama.cpp's `llama_token_data_array_partial_sort` buckets logits) to estimate
//! how many of the best tokens the nucleus needs; only those are selected and sorted. If
//! the estimate falls short (float rounding), the sorted prefix grows fourfold at a time.

use super::candidates::Candidates;

/// Below this, sort everything at once (llama.cpp's threshold).
const SMALL: usize = 1024;
/// Growth factor of the sorted prefix when the estimate falls short.
const GROWTH: usize = 4;
/// Buckets per unit of logit below the maximum, and how many: 32 logits down, a token has
/// p < e^-32 = 1.3e-14, so the last (catch-all) bucket never matters for any sane `p`.
const BUCKETS_PER_LOGIT: f32 = 8.0;
const BUCKETS: usize = 256;

pub(super) fn top_p(c: &mut Candidates, p: f32, min_keep: usize) {
    if p >= 1.0 || c.is_empty() {
        return;
    }
    c.softmax();
    let first = if c.is_sorted() || c.len() <= SMALL {
        c.len()
    } else {
        nucleus_estimate(c, p).max(min_keep)
    };
    let keep = scan(c, p, min_keep, first);
    // Sorted up to `keep`: a break happens inside the sorted prefix, and a scan that runs to
    // the end has grown the prefix to the whole list on the way.
    c.truncate(keep);
    c.set_sorted();
}

/// Sorts the best `first`, then walks best first until the cumulative probability reaches
/// `p` with at least `min_keep` kept, growing the sorted prefix when the walk reaches its
/// end. Returns how many to keep.
fn scan(c: &mut Candidates, p: f32, min_keep: usize, first: usize) -> usize {
    let mut prefix = first.max(1).min(c.len());
    c.sort_prefix(prefix);
    let mut cum = 0.0f32;
    for i in 0..c.len() {
        if i == prefix {
            let grown = prefix.saturating_mul(GROWTH);
            c.extend_sorted_prefix(prefix, grown);
            prefix = grown.min(c.len());
        }
        cum += c.items()[i].p;
        if cum >= p && i + 1 >= min_keep {
            return i + 1;
        }
    }
    c.len()
}

/// How many of the best candidates hold mass `p`, rounded up to whole buckets plus one
/// spare bucket (the bucket sums add in a different order than the sorted scan). Needs
/// `p` filled in.
fn nucleus_estimate(c: &Candidates, p: f32) -> usize {
    let max = c.max_logit();
    if !max.is_finite() {
        // +inf logits: the nucleus is among them; let the prefix grow from a small start.
        return 256;
    }
    let mut mass = [0.0f64; BUCKETS];
    let mut count = [0usize; BUCKETS];
    for x in c.items() {
        // Saturating float-to-int cast: -inf logits (d = inf) land in the last bucket.
        let b = (((max - x.logit) * BUCKETS_PER_LOGIT) as usize).min(BUCKETS - 1);
        mass[b] += f64::from(x.p);
        count[b] += 1;
    }
    let mut cum = 0.0f64;
    let mut n = 0;
    for b in 0..BUCKETS {
        cum += mass[b];
        n += count[b];
        if cum >= f64::from(p) {
            return n + count.get(b + 1).copied().unwrap_or(0);
        }
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(probs: &[f32], p: f32, min_keep: usize) -> Vec<u32> {
        let logits: Vec<f32> = probs.iter().map(|x| x.ln()).collect();
        let mut c = Candidates::from_logits(&logits).unwrap();
        top_p(&mut c, p, min_keep);
        c.items().iter().map(|c| c.id).collect()
    }

    #[test]
    fn keeps_smallest_prefix_reaching_p() {
        let probs = [0.1, 0.4, 0.2, 0.3];
        assert_eq!(run(&probs, 0.4, 0), [1]);
        assert_eq!(run(&probs, 0.5, 0), [1, 3]);
        assert_eq!(run(&probs, 0.7, 0), [1, 3]);
        assert_eq!(run(&probs, 0.75, 0), [1, 3, 2]);
    }

    #[test]
    fn min_keep_and_off() {
        let probs = [0.1, 0.4, 0.2, 0.3];
        assert_eq!(run(&probs, 0.1, 3), [1, 3, 2]);
        assert_eq!(run(&probs, 1.0, 0), [0, 1, 2, 3]);
        assert_eq!(run(&probs, 0.0, 0), [1]);
    }

    /// The ids top-p keeps, computed the plain way: full sort, then the scan.
    fn reference(logits: &[f32], p: f32) -> Vec<u32> {
        let mut c = Candidates::from_logits(logits).unwrap();
        c.softmax();
        c.sort();
        let mut cum = 0.0f32;
        let n = c.items().iter().take_while(|x| {
            let before = cum;
            cum += x.p;
            before < p
        });
        let n = n.count();
        c.items()[..n].iter().map(|x| x.id).collect()
    }

    fn wide_logits() -> Vec<f32> {
        // 20k tokens spread over 40 logits: the nucleus is a strict, multi-bucket subset.
        (0..20_000)
            .map(|i| ((i * 7919) % 20_000) as f32 * 2e-3)
            .collect()
    }

    #[test]
    fn large_unsorted_list_matches_a_full_sort() {
        let logits = wide_logits();
        for p in [0.5, 0.9, 0.95, 0.999] {
            let mut c = Candidates::from_logits(&logits).unwrap();
            top_p(&mut c, p, 0);
            let ids: Vec<u32> = c.items().iter().map(|x| x.id).collect();
            assert_eq!(ids, reference(&logits, p), "p = {p}");
            assert!(c.len() > 1 && c.len() < logits.len());
        }
    }

    #[test]
    fn growing_from_a_short_prefix_matches_a_full_sort() {
        let logits = wide_logits();
        let mut c = Candidates::from_logits(&logits).unwrap();
        c.softmax();
        let keep = scan(&mut c, 0.9, 0, 1);
        let ids: Vec<u32> = c.items()[..keep].iter().map(|x| x.id).collect();
        assert_eq!(ids, reference(&logits, 0.9));
    }
}
