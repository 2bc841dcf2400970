//! AdamW with global-norm clipping, and the learning-rate schedules: the maths of
//! `torch.optim.AdamW`, `torch.nn.utils.clip_grad_norm_` and transformers'
//! `get_{constant,linear,cosine}_schedule_with_warmup`, over the tape's f64 parameters. The
//! update is the GPU optimizer's reference (`rullama_kernels::ops::adamw`), one call per
//! matrix with the norm of all of them.

use rullama_kernels::ops::adamw::{self as kernel, adamw_ref, grad_norm_sq_ref};
use serde::{Deserialize, Serialize};

use crate::tape::Matrix;

/// AdamW's settings (transformers' `TrainingArguments` defaults but the rate).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct AdamWConfig {
    /// The peak learning rate.
    pub lr: f64,
    /// `beta1`.
    pub beta1: f64,
    /// `beta2`.
    pub beta2: f64,
    /// Added to the root of the second moment.
    pub eps: f64,
    /// Decoupled weight decay.
    pub weight_decay: f64,
    /// The gradients' global norm is clipped to this; 0: no clipping.
    pub max_grad_norm: f64,
}

impl Default for AdamWConfig {
    fn default() -> Self {
        AdamWConfig {
            lr: 2e-4,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            weight_decay: 0.0,
            max_grad_norm: 1.0,
        }
    }
}

/// How the learning rate moves over the run, after a linear warm-up from 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Schedule {
    /// The peak rate throughout.
    Constant,
    /// Down to 0 in a line at the last step.
    Linear,
    /// Down to 0 along half a cosine.
    Cosine,
}

impl Schedule {
    /// The name a user gives (`constant`, `linear`, `cosine`).
    pub fn from_name(name: &str) -> Option<Schedule> {
        match name {
            "constant" => Some(Schedule::Constant),
            "linear" => Some(Schedule::Linear),
            "cosine" => Some(Schedule::Cosine),
            _ => None,
        }
    }

    /// The factor of the peak rate at optimizer step `step` (0-based) of `total`, after
    /// `warmup` steps of linear warm-up: transformers' schedules, step for step.
    pub fn factor(self, step: u64, warmup: u64, total: u64) -> f64 {
        if step < warmup {
            return step as f64 / warmup.max(1) as f64;
        }
        let progress = (step - warmup) as f64 / total.saturating_sub(warmup).max(1) as f64;
        match self {
            Schedule::Constant => 1.0,
            Schedule::Linear => (1.0 - progress).max(0.0),
            Schedule::Cosine => (0.5 * (1.0 + (std::f64::consts::PI * progress).cos())).max(0.0),
        }
    }
}

/// AdamW's state: the moments of every parameter and the steps taken.
#[derive(Debug, Clone, PartialEq)]
pub struct AdamW {
    /// The settings.
    pub config: AdamWConfig,
    /// First moments, one per parameter.
    pub m: Vec<Matrix>,
    /// Second moments.
    pub v: Vec<Matrix>,
    /// Steps applied (a skipped step, its gradient not finite, is not one): the bias
    /// corrections' `t` of the next step is one more.
    pub steps: u64,
}

impl AdamW {
    /// Zero moments for `params`.
    pub fn new(config: AdamWConfig, params: &[Matrix]) -> AdamW {
        let zeros = || {
            params
                .iter()
                .map(|p| Matrix::zeros(p.rows, p.cols))
                .collect()
        };
        AdamW {
            config,
            m: zeros(),
            v: zeros(),
            steps: 0,
        }
    }

    /// One step at learning rate `lr`: the gradients clipped to the global norm (their
    /// norm before clipping is returned), then per value, in torch's order,
    /// `w -= lr wd w`, the moments, and `w -= lr / (1 - b1^t) · m / (sqrt(v) / sqrt(1 - b2^t) + eps)`.
    /// A norm that is not finite (NaN or infinite) skips the step, as the GPU's kernel does:
    /// parameters, moments and [`AdamW::steps`] stay as they were, and that norm is returned.
    pub fn step(&mut self, params: &mut [Matrix], grads: &[Matrix], lr: f64) -> f64 {
        let c = self.config;
        let norm_sq: f64 = grads.iter().map(|g| grad_norm_sq_ref(&g.data)).sum();
        if !kernel::applies(norm_sq) {
            return norm_sq.sqrt();
        }
        self.steps += 1;
        let step = kernel::AdamW {
            lr,
            beta1: c.beta1,
            beta2: c.beta2,
            eps: c.eps,
            weight_decay: c.weight_decay,
            max_norm: c.max_grad_norm,
            step: u32::try_from(self.steps).unwrap_or(u32::MAX),
        };
        for (((p, g), m), v) in params
            .iter_mut()
            .zip(grads)
            .zip(&mut self.m)
            .zip(&mut self.v)
        {
            adamw_ref(
                &step,
                &mut p.data,
                &g.data,
                &mut m.data,
                &mut v.data,
                norm_sq,
            );
        }
        norm_sq.sqrt()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_step_moves_each_weight_by_the_rate_against_its_gradient() {
        // With bias correction the first step is lr * g / (|g| + eps): the sign of g.
        let mut p = vec![Matrix::new(1, 3, vec![1.0, -2.0, 0.5])];
        let g = vec![Matrix::new(1, 3, vec![0.3, -0.1, 0.0])];
        let config = AdamWConfig {
            lr: 0.01,
            max_grad_norm: 0.0,
            ..AdamWConfig::default()
        };
        let mut opt = AdamW::new(config, &p);
        let norm = opt.step(&mut p, &g, 0.01);
        assert!((norm - (0.09f64 + 0.01).sqrt()).abs() < 1e-15);
        let want = [
            1.0 - 0.01 * 0.3 / (0.3 + 1e-8),
            -2.0 + 0.01 * 0.1 / (0.1 + 1e-8),
            0.5,
        ];
        for (w, want) in p[0].data.iter().zip(want) {
            assert!((w - want).abs() < 1e-15, "{w} vs {want}");
        }
    }

    #[test]
    fn weight_decay_is_decoupled_and_clipping_scales_the_gradient() {
        let mut p = vec![Matrix::new(1, 2, vec![2.0, 2.0])];
        let g = vec![Matrix::new(1, 2, vec![3.0, 4.0])];
        let config = AdamWConfig {
            lr: 0.1,
            weight_decay: 0.5,
            max_grad_norm: 1.0,
            ..AdamWConfig::default()
        };
        let mut opt = AdamW::new(config, &p);
        assert_eq!(opt.step(&mut p, &g, 0.1), 5.0);
        // Clipped to norm 1 (torch's 1e-6 guard included); the first moment holds 0.1 g.
        let clip = 1.0 / (5.0 + 1e-6);
        assert!((opt.m[0].data[0] - 0.1 * 3.0 * clip).abs() < 1e-16);
        assert!((opt.m[0].data[1] - 0.1 * 4.0 * clip).abs() < 1e-16);
        // w = 2 (1 - 0.05) - 0.1 * sign(g).
        for w in &p[0].data {
            assert!((w - (1.9 - 0.1)).abs() < 1e-7, "{w}");
        }
    }

    /// A gradient holding a NaN or an infinity (or finite values whose squares overflow)
    /// leaves the parameters, the moments and the step count as they were; the next finite
    /// gradient then takes the step the skipped one would have, bit for bit.
    #[test]
    fn a_gradient_that_is_not_finite_is_skipped() {
        let config = AdamWConfig {
            lr: 0.1,
            weight_decay: 0.01,
            ..AdamWConfig::default()
        };
        let mut p = vec![Matrix::new(1, 3, vec![1.0, -2.0, 0.5])];
        let mut opt = AdamW::new(config, &p);
        opt.step(&mut p, &[Matrix::new(1, 3, vec![0.3, -0.1, 0.2])], 0.1);
        let (p1, opt1) = (p.clone(), opt.clone());
        let good = vec![Matrix::new(1, 3, vec![-0.2, 0.4, 0.1])];
        let (mut want_p, mut want_opt) = (p1.clone(), opt1.clone());
        want_opt.step(&mut want_p, &good, 0.1);
        for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 1e200] {
            let g = vec![Matrix::new(1, 3, vec![0.1, bad, 0.2])];
            let norm = opt.step(&mut p, &g, 0.1);
            assert!(!norm.is_finite(), "{bad}: norm {norm}");
            assert_eq!((&p, &opt), (&p1, &opt1), "{bad} changed the state");
            assert_eq!(opt.steps, 1);
        }
        let norm = opt.step(&mut p, &good, 0.1);
        assert!(norm.is_finite());
        assert_eq!((&p, &opt), (&want_p, &want_opt));
        assert_eq!(opt.steps, 2);
    }

    #[test]
    fn schedules_follow_transformers() {
        assert_eq!(Schedule::Linear.factor(0, 2, 10), 0.0);
        assert_eq!(Schedule::Linear.factor(1, 2, 10), 0.5);
        assert_eq!(Schedule::Linear.factor(2, 2, 10), 1.0);
        assert_eq!(Schedule::Linear.factor(6, 2, 10), 0.5);
        assert_eq!(Schedule::Linear.factor(10, 2, 10), 0.0);
        assert!((Schedule::Cosine.factor(6, 2, 10) - 0.5).abs() < 1e-15);
        assert_eq!(Schedule::Constant.factor(9, 0, 10), 1.0);
    }
}
