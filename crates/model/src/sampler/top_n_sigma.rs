//! Top-n-sigma (Tang et al. 2024), as llama.cpp's `llama_sampler_top_n_sigma_apply`: keep
//! tokens whose logit is within `n` standard deviations of the best, the mean and deviation
//! taken over the non -inf logits. `n <= 0` is off.
//!
//! llama.cpp sets the dropped logits to -inf and keeps them; they then have probability 0
//! and can never be drawn, so removing them gives the same distribution with less work for
//! the later stages.

use super::candidates::Candidates;

pub(super) fn top_n_sigma(c: &mut Candidates, n: f32) {
    if n <= 0.0 || c.len() <= 1 {
        return;
    }
    let finite = || {
        c.items()
            .iter()
            .map(|x| f64::from(x.logit))
            .filter(|&l| l != f64::NEG_INFINITY)
    };
    let count = finite().count();
    if count == 0 {
        return;
    }
    let mean = finite().sum::<f64>() / count as f64;
    let var = finite().map(|l| (l - mean) * (l - mean)).sum::<f64>() / count as f64;
    let max = f64::from(c.max_logit());
    let threshold = max - f64::from(n) * var.sqrt();
    if threshold.is_nan() {
        // +inf logits make the mean inf and the deviation NaN; llama.cpp's `logit < NaN`
        // is then false everywhere and nothing is removed.
        return;
    }
    c.retain(|x| f64::from(x.logit) >= threshold);
    c.sort();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(logits: &[f32], n: f32) -> Vec<u32> {
        let mut c = Candidates::from_logits(logits).unwrap();
        top_n_sigma(&mut c, n);
        c.items().iter().map(|c| c.id).collect()
    }

    #[test]
    fn keeps_logits_within_n_sigma_of_the_max() {
        // Mean 2, deviation 2 (population): max 4, so n = 1 keeps logits >= 2.
        let logits = [0.0, 4.0, 2.0, 0.0, 4.0];
        let logits: Vec<f32> = logits.to_vec();
        let mean = 2.0f32;
        let sd = (logits.iter().map(|l| (l - mean).powi(2)).sum::<f32>() / 5.0).sqrt();
        assert!((sd - 1.788_854).abs() < 1e-5);
        // Threshold 4 - 1.79 = 2.21: only the two 4s.
        assert_eq!(run(&logits, 1.0), [1, 4]);
        // Threshold 4 - 1.5 * 1.79 = 1.32: the 2 joins.
        assert_eq!(run(&logits, 1.5), [1, 4, 2]);
    }

    #[test]
    fn ignores_neg_inf_in_the_statistics_and_can_be_off() {
        let logits = [f32::NEG_INFINITY, 1.0, 3.0];
        // Mean 2, deviation 1: threshold 3 - 1 = 2.
        assert_eq!(run(&logits, 1.0), [2]);
        assert_eq!(run(&logits, 0.0), [0, 1, 2]);
        assert_eq!(run(&logits, -1.0), [0, 1, 2]);
    }
}
