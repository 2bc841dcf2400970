//! Every knob of the sampler, with llama.cpp's defaults (`common_params_sampling` in
//! `common/common.h`).

use super::penalties::PenaltyParams;
use super::rng::RANDOM_SEED;
use super::xtc::XtcParams;
use crate::validate::{self, InvalidParam, Param};

/// The sampler chain's settings: llama.cpp's stages in llama.cpp's order, each with its
/// default ([`Default`]) and the value that turns it off.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SamplerParams {
    /// Seed of the draw (and of XTC). [`RANDOM_SEED`] (u32::MAX, llama.cpp's
    /// `LLAMA_DEFAULT_SEED`) picks a fresh one per [`Sampler::new`](super::Sampler::new) and
    /// [`reset`](super::Sampler::reset); any other value makes the sequence reproducible.
    /// llama.cpp: random.
    pub seed: u32,
    /// <= 0 is greedy (argmax, ties to the lowest id). llama.cpp: 0.8.
    pub temperature: f32,
    /// <= 0 keeps all. llama.cpp: 40.
    pub top_k: i32,
    /// >= 1 is off. llama.cpp: 0.95.
    pub top_p: f32,
    /// <= 0 is off. llama.cpp: 0.05.
    pub min_p: f32,
    /// Locally typical sampling; >= 1 is off. llama.cpp: 1.0.
    pub typical_p: f32,
    /// <= 0 is off. llama.cpp: -1.
    pub top_n_sigma: f32,
    /// The fewest tokens top-p, min-p, typical-p and XTC may leave; 0 and 1 both mean one.
    /// llama.cpp: 0.
    pub min_keep: usize,
    /// Repetition, frequency and presence penalties (off by default).
    pub penalties: PenaltyParams,
    /// Exclude-top-choices (off by default).
    pub xtc: XtcParams,
}

impl Default for SamplerParams {
    fn default() -> Self {
        Self {
            seed: RANDOM_SEED,
            temperature: 0.8,
            top_k: 40,
            top_p: 0.95,
            min_p: 0.05,
            typical_p: 1.0,
            top_n_sigma: -1.0,
            min_keep: 0,
            penalties: PenaltyParams::default(),
            xtc: XtcParams::default(),
        }
    }
}

impl SamplerParams {
    /// Whether every value is in the range where it has a meaning ([`Param::range`]):
    /// temperature finite and >= 0, top-k >= 0, top-p, min-p, typical-p and XTC's values in
    /// [0, 1], the repeat penalty finite and > 0, the other penalties and top-n-sigma finite.
    /// The first value out of range is the error. Counts (`min_keep`, the penalty window)
    /// and the seed take any value: a window longer than the context only ever holds the
    /// context. Front ends call this before loading a model; [`Sampler::new`](super::Sampler::new)
    /// takes any value and gives it llama.cpp's meaning.
    pub fn validate(&self) -> Result<(), InvalidParam> {
        let t = self.temperature;
        validate::require(Param::Temperature, t, t.is_finite() && t >= 0.0)?;
        validate::top_k(self.top_k)?;
        validate::unit(Param::TopP, self.top_p)?;
        validate::unit(Param::MinP, self.min_p)?;
        validate::unit(Param::TypicalP, self.typical_p)?;
        validate::finite(Param::TopNSigma, self.top_n_sigma)?;
        let pen = &self.penalties;
        let r = pen.repeat;
        validate::require(Param::RepeatPenalty, r, r.is_finite() && r > 0.0)?;
        validate::finite(Param::FrequencyPenalty, pen.frequency)?;
        validate::finite(Param::PresencePenalty, pen.presence)?;
        validate::unit(Param::XtcProbability, self.xtc.probability)?;
        validate::unit(Param::XtcThreshold, self.xtc.threshold)
    }

    /// Argmax of the raw logits: temperature 0 and every filter and penalty off, so the result
    /// does not depend on history or seed.
    pub fn greedy() -> Self {
        Self {
            seed: 0,
            temperature: 0.0,
            top_k: 0,
            top_p: 1.0,
            min_p: 0.0,
            typical_p: 1.0,
            top_n_sigma: -1.0,
            min_keep: 0,
            penalties: PenaltyParams {
                last_n: 0,
                ..PenaltyParams::default()
            },
            xtc: XtcParams::default(),
        }
    }

    /// Greedy decoding whose result is the argmax of the penalized logits: the filters that
    /// always keep the best token (top-k, top-p, min-p, top-n-sigma) cannot change it and can
    /// be skipped; typical-p and XTC can drop the best token, so with those on the whole
    /// chain runs, as in llama.cpp.
    pub(super) fn is_plain_greedy(&self) -> bool {
        self.temperature <= 0.0 && self.typical_p >= 1.0 && self.xtc.is_off()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_llama_cpp_defaults() {
        let p = SamplerParams::default();
        assert_eq!(p.seed, 0xFFFF_FFFF);
        assert_eq!(
            (p.temperature, p.top_k, p.top_p, p.min_p),
            (0.8, 40, 0.95, 0.05)
        );
        assert_eq!((p.typical_p, p.top_n_sigma, p.min_keep), (1.0, -1.0, 0));
        let pen = p.penalties;
        assert_eq!(
            (pen.last_n, pen.repeat, pen.frequency, pen.presence),
            (64, 1.0, 0.0, 0.0)
        );
        assert_eq!((p.xtc.probability, p.xtc.threshold), (0.0, 0.1));
        assert!(!p.is_plain_greedy());
        assert!(SamplerParams::greedy().is_plain_greedy());
    }
}
