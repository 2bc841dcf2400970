//! XTC, "exclude top choices" (p-e-w, text-generation-webui #6335), as llama.cpp's
//! `llama_sample_xtc_apply`: with chance `probability`, remove every token whose probability
//! is at least `threshold` except the least probable of them, steering away from the most
//! predictable continuations while keeping one viable choice.

use super::candidates::Candidates;
use super::rng::SplitMix64;

/// XTC's settings, with llama.cpp's defaults (off).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct XtcParams {
    /// Chance per token that XTC acts; 0 is off. llama.cpp: 0.
    pub probability: f32,
    /// Probability at or above which a token counts as a top choice; above 0.5 is off
    /// (at most one token can reach it, and XTC always keeps one). llama.cpp: 0.1.
    pub threshold: f32,
}

impl Default for XtcParams {
    fn default() -> Self {
        Self {
            probability: 0.0,
            threshold: 0.1,
        }
    }
}

impl XtcParams {
    pub(super) fn is_off(&self) -> bool {
        self.probability <= 0.0 || self.threshold > 0.5
    }
}

/// `rng` is XTC's own stream (llama.cpp gives it its own generator too), so turning XTC on
/// does not change which tokens the final draw picks when XTC does not act.
pub(super) fn xtc(c: &mut Candidates, params: &XtcParams, min_keep: usize, rng: &mut SplitMix64) {
    if params.is_off() || c.len() < 2 {
        return;
    }
    if rng.next_f64() as f32 > params.probability {
        return;
    }
    c.sort();
    c.softmax();
    let above = c
        .items()
        .iter()
        .take_while(|x| x.p >= params.threshold)
        .count();
    // Remove all the top choices but the last one.
    let remove = above.saturating_sub(1);
    if remove > 0 && c.len() - remove >= min_keep {
        c.drop_front(remove);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(probs: &[f32], params: XtcParams, min_keep: usize) -> Vec<u32> {
        let logits: Vec<f32> = probs.iter().map(|x| x.ln()).collect();
        let mut c = Candidates::from_logits(&logits).unwrap();
        xtc(&mut c, &params, min_keep, &mut SplitMix64::new(1));
        let mut ids: Vec<u32> = c.items().iter().map(|c| c.id).collect();
        ids.sort_unstable();
        ids
    }

    const ALWAYS: XtcParams = XtcParams {
        probability: 1.0,
        threshold: 0.2,
    };

    #[test]
    fn removes_top_choices_but_the_last() {
        // 0.4 and 0.3 are >= 0.2: 0.4 goes, 0.3 (the least probable top choice) stays.
        assert_eq!(run(&[0.3, 0.4, 0.2, 0.1], ALWAYS, 0), [0, 2, 3]);
    }

    #[test]
    fn single_top_choice_or_min_keep_leaves_all() {
        assert_eq!(run(&[0.7, 0.15, 0.15], ALWAYS, 0), [0, 1, 2]);
        assert_eq!(run(&[0.3, 0.4, 0.2, 0.1], ALWAYS, 4), [0, 1, 2, 3]);
    }

    #[test]
    fn off_settings_do_nothing() {
        let probs = [0.3, 0.4, 0.2, 0.1];
        for params in [
            XtcParams::default(),
            XtcParams {
                threshold: 0.6,
                ..ALWAYS
            },
        ] {
            assert_eq!(run(&probs, params, 0), [0, 1, 2, 3]);
        }
    }
}
