//! Locally typical sampling (Meister et al. 2022), as llama.cpp's
//! `llama_sampler_typical_apply`: rank tokens by how far their surprise (-ln p) is from the
//! entropy, keep the closest until their cumulative probability exceeds `p`, at least
//! `min_keep`. `p >= 1` is off. The result is in typicality order, not logit order.

use super::candidates::Candidates;

pub(super) fn typical(c: &mut Candidates, p: f32, min_keep: usize) {
    if p >= 1.0 || c.is_empty() {
        return;
    }
    c.sort();
    c.softmax();
    // 0 * ln 0 is taken as 0 (llama.cpp would produce NaN for a zero probability).
    let entropy: f32 = c
        .items()
        .iter()
        .filter(|x| x.p > 0.0)
        .map(|x| -x.p * x.p.ln())
        .sum();
    let score = |p: f32| (-p.ln() - entropy).abs();

    let mut order: Vec<usize> = (0..c.len()).collect();
    // Stable: equal scores keep the logit order.
    order.sort_by(|&a, &b| score(c.items()[a].p).total_cmp(&score(c.items()[b].p)));

    let mut cum = 0.0f32;
    let mut keep = order.len();
    for (i, &idx) in order.iter().enumerate() {
        cum += c.items()[idx].p;
        if cum > p && (min_keep == 0 || i + 1 >= min_keep) {
            keep = i + 1;
            break;
        }
    }
    let kept: Vec<_> = order[..keep].iter().map(|&i| c.items()[i]).collect();
    c.replace(&kept, false);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(probs: &[f32], p: f32, min_keep: usize) -> Vec<u32> {
        let logits: Vec<f32> = probs.iter().map(|x| x.ln()).collect();
        let mut c = Candidates::from_logits(&logits).unwrap();
        typical(&mut c, p, min_keep);
        c.items().iter().map(|c| c.id).collect()
    }

    #[test]
    fn prefers_tokens_near_the_entropy() {
        // Entropy of [0.7, 0.2, 0.1] is 0.80 nats; surprises are 0.36, 1.61, 2.30, so the
        // most typical token is the most probable, then the 0.2 one.
        let probs = [0.1, 0.7, 0.2];
        assert_eq!(run(&probs, 0.5, 0), [1]);
        assert_eq!(run(&probs, 0.8, 0), [1, 2]);
    }

    #[test]
    fn can_drop_the_most_probable_token() {
        // Entropy of [0.4, 0.3, 0.3] is 1.09; surprises 0.92, 1.20, 1.20: the 0.3 tokens
        // are 0.11 away, the 0.4 one 0.17, so the two 0.3 tokens come first.
        let probs = [0.4, 0.3, 0.3];
        assert_eq!(run(&probs, 0.5, 0), [1, 2]);
    }

    #[test]
    fn off_and_min_keep() {
        let probs = [0.1, 0.7, 0.2];
        assert_eq!(run(&probs, 1.0, 0), [0, 1, 2]);
        assert_eq!(run(&probs, 0.5, 3), [1, 2, 0]);
    }
}
