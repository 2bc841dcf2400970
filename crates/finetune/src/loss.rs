//! The training loss: cross-entropy of the next token, over the positions the mask keeps.

use rullama_kernels::ops::cross_entropy::{
    CrossEntropy, MASKED, cross_entropy_loss_ref, cross_entropy_ref,
};

use crate::tape::Matrix;

/// The next-token targets of a sequence: row `r`'s target is `tokens[r + 1]` where
/// `mask[r + 1]` (the mask marks the tokens to predict), else `None`; the last row has none.
pub fn targets(tokens: &[u32], mask: &[bool]) -> Vec<Option<u32>> {
    (0..tokens.len())
        .map(|r| (r + 1 < tokens.len() && mask[r + 1]).then(|| tokens[r + 1]))
        .collect()
}

/// `weight · Σ_r (lse(z_r) - z_r[t_r])` over the rows with a target, and its gradient
/// `weight (softmax(z_r) - onehot(t_r))` (zero rows where there is no target), in f64: the
/// GPU loss head's reference (`rullama_kernels::ops::cross_entropy`), whose weight is an
/// f32 as the kernel's.
pub fn cross_entropy(logits: &Matrix, targets: &[Option<u32>], weight: f32) -> (f64, Matrix) {
    assert_eq!(targets.len(), logits.rows, "one target per row");
    let p = CrossEntropy {
        n: logits.rows,
        vocab: logits.cols,
        softcap: 0.0,
        weight,
    };
    let ids: Vec<u32> = targets.iter().map(|t| t.unwrap_or(MASKED)).collect();
    let (loss, grad) = cross_entropy_ref(&p, &logits.data, &ids);
    let total = f64::from(weight) * loss.iter().sum::<f64>();
    (total, Matrix::new(logits.rows, logits.cols, grad))
}

/// The loss of [`cross_entropy`] alone (evaluation): the same value, without the
/// `[tokens × vocab]` gradient (1 GB of f64 for 512 tokens of a 262,144-word vocabulary).
pub fn cross_entropy_loss(logits: &Matrix, targets: &[Option<u32>], weight: f32) -> f64 {
    assert_eq!(targets.len(), logits.rows, "one target per row");
    let p = CrossEntropy {
        n: logits.rows,
        vocab: logits.cols,
        softcap: 0.0,
        weight,
    };
    let ids: Vec<u32> = targets.iter().map(|t| t.unwrap_or(MASKED)).collect();
    let loss = cross_entropy_loss_ref(&p, &logits.data, &ids);
    f64::from(weight) * loss.iter().sum::<f64>()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_loss_alone_is_the_loss_with_its_gradient() {
        let (rows, cols) = (5, 37);
        let data = (0..rows * cols)
            .map(|i| ((i * 7919 % 101) as f64 - 50.0) / 7.0)
            .collect();
        let logits = Matrix::new(rows, cols, data);
        let targets = [Some(3), None, Some(36), Some(0), None];
        let weight = 1.0 / 3.0;
        let (with_grad, _) = cross_entropy(&logits, &targets, weight);
        assert_eq!(cross_entropy_loss(&logits, &targets, weight), with_grad);
    }
}
