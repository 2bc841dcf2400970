//! The training loss: cross-entropy of the next token, over the positions the mask keeps.

use crate::tape::Matrix;

/// The next-token targets of a sequence: row `r`'s target is `tokens[r + 1]` where
/// `mask[r + 1]` (the mask marks the tokens to predict), else `None`; the last row has none.
pub fn targets(tokens: &[u32], mask: &[bool]) -> Vec<Option<u32>> {
    (0..tokens.len())
        .map(|r| (r + 1 < tokens.len() && mask[r + 1]).then(|| tokens[r + 1]))
        .collect()
}

/// `weight · Σ_r (lse(z_r) - z_r[t_r])` over the rows with a target, and its gradient
/// `weight (softmax(z_r) - onehot(t_r))` (zero rows where there is no target), in f64.
pub fn cross_entropy(logits: &Matrix, targets: &[Option<u32>], weight: f64) -> (f64, Matrix) {
    assert_eq!(targets.len(), logits.rows, "one target per row");
    let mut grad = Matrix::zeros(logits.rows, logits.cols);
    let mut loss = 0.0;
    for (r, t) in targets.iter().enumerate() {
        let Some(t) = t else { continue };
        let z = logits.row(r);
        let max = z.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let sum: f64 = z.iter().map(|v| (v - max).exp()).sum();
        let lse = max + sum.ln();
        loss += weight * (lse - z[*t as usize]);
        let g = grad.row_mut(r);
        for (g, v) in g.iter_mut().zip(z) {
            *g = weight * (v - lse).exp();
        }
        g[*t as usize] -= weight;
    }
    (loss, grad)
}
