//! Min-p, as llama.cpp's `llama_sampler_min_p_apply`: keep tokens with p >= min_p * p_max,
//! tested in logit space (logit >= max_logit + ln min_p) so no softmax is needed; at least
//! `min_keep`. `min_p <= 0` is off.

use super::candidates::Candidates;

pub(super) fn min_p(c: &mut Candidates, min_p: f32, min_keep: usize) {
    if min_p <= 0.0 || c.is_empty() {
        return;
    }
    let threshold = c.max_logit() + min_p.ln();
    if !c.is_sorted() {
        // One pass without sorting; the max always passes, so this only falls through to
        // the sorted path when min_keep asks for more than pass.
        let passing = c.items().iter().filter(|x| x.logit >= threshold).count();
        if passing > 0 && passing >= min_keep {
            c.retain(|x| x.logit >= threshold);
            return;
        }
        c.sort();
    }
    // Sorted: the first token always stays; stop at the first one below the threshold once
    // min_keep are kept.
    let keep = c
        .items()
        .iter()
        .enumerate()
        .skip(1)
        .find(|(i, x)| x.logit < threshold && *i >= min_keep)
        .map_or(c.len(), |(i, _)| i);
    c.truncate(keep);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(probs: &[f32], p: f32, min_keep: usize, sorted: bool) -> Vec<u32> {
        let logits: Vec<f32> = probs.iter().map(|x| x.ln()).collect();
        let mut c = Candidates::from_logits(&logits).unwrap();
        if sorted {
            c.sort();
        }
        min_p(&mut c, p, min_keep);
        let mut ids: Vec<u32> = c.items().iter().map(|c| c.id).collect();
        ids.sort_unstable();
        ids
    }

    #[test]
    fn keeps_tokens_within_factor_of_the_best() {
        let probs = [0.5, 0.05, 0.3, 0.15];
        for sorted in [false, true] {
            // Threshold 0.5 * 0.29 = 0.145: token 3 (0.15) stays, token 1 (0.05) goes.
            assert_eq!(run(&probs, 0.29, 0, sorted), [0, 2, 3]);
            assert_eq!(run(&probs, 0.7, 0, sorted), [0]);
            assert_eq!(run(&probs, 0.0, 0, sorted), [0, 1, 2, 3]);
        }
    }

    #[test]
    fn min_keep_wins_over_the_threshold() {
        let probs = [0.5, 0.05, 0.3, 0.15];
        for sorted in [false, true] {
            assert_eq!(run(&probs, 0.7, 2, sorted), [0, 2]);
        }
    }
}
