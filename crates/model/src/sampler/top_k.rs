//! Top-k, as llama.cpp's `llama_sampler_top_k_impl`: keep the k best logits; k <= 0 keeps all.
//! Partial selection, not a full sort: k = 40 out of 262,144 is one O(n) pass.

use super::candidates::Candidates;

pub(super) fn top_k(c: &mut Candidates, k: i32) {
    if k <= 0 {
        return;
    }
    let k = usize::try_from(k).unwrap_or(usize::MAX).min(c.len());
    c.sort_prefix(k);
    c.truncate(k);
    c.set_sorted();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(logits: &[f32], k: i32) -> Vec<u32> {
        let mut c = Candidates::from_logits(logits).unwrap();
        top_k(&mut c, k);
        c.items().iter().map(|c| c.id).collect()
    }

    #[test]
    fn keeps_the_k_best_in_order() {
        assert_eq!(run(&[0.1, 0.9, 0.5, 0.7, 0.3], 3), [1, 3, 2]);
    }

    #[test]
    fn ties_go_to_the_lower_id() {
        assert_eq!(run(&[1.0, 2.0, 2.0, 2.0], 2), [1, 2]);
    }

    #[test]
    fn non_positive_or_large_k_keeps_all() {
        assert_eq!(run(&[0.1, 0.9], 0), [0, 1]);
        assert_eq!(run(&[0.1, 0.9], -5), [0, 1]);
        assert_eq!(run(&[0.1, 0.9], 10), [1, 0]);
    }
}
