//! Small functions over a row of logits.

/// The index of the largest logit (the first, on ties).
pub fn argmax(logits: &[f32]) -> usize {
    let mut best = 0;
    for (i, &v) in logits.iter().enumerate() {
        if v > logits[best] {
            best = i;
        }
    }
    best
}

/// `log softmax`, computed in f64.
pub fn log_softmax(logits: &[f32]) -> Vec<f64> {
    let max = logits
        .iter()
        .fold(f64::NEG_INFINITY, |m, &v| m.max(v as f64));
    let sum: f64 = logits.iter().map(|&v| (v as f64 - max).exp()).sum();
    let log_z = max + sum.ln();
    logits.iter().map(|&v| v as f64 - log_z).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_softmax_normalises() {
        let lp = log_softmax(&[1.0, 2.0, 3.0]);
        let total: f64 = lp.iter().map(|v| v.exp()).sum();
        assert!((total - 1.0).abs() < 1e-12);
        assert_eq!(argmax(&[1.0, 3.0, 3.0, 2.0]), 1);
    }
}
