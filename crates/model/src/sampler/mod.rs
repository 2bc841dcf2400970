//! Token sampling with llama.cpp's semantics and defaults.
//!
//! [`Sampler::sample`] runs llama.cpp's default chain (`common_params_sampling::samplers` in
//! `common/common.h`, assembled by `common_sampler_init` in `common/sampling.cpp`) over a
//! candidate list (id, logit, probability), each stage a function in its own file with the semantics of its
//! `src/llama-sampling.cpp` counterpart:
//!
//! penalties → top-n-sigma → top-k → typical-p → top-p → min-p → XTC → temperature → draw
//!
//! Not implemented: DRY (llama.cpp's second stage; it needs the vocabulary's text for its
//! sequence breakers and is off by default), dynamic temperature, mirostat, logit bias and
//! grammars. Note the order: top-p and min-p see the temperature-1 distribution; the
//! temperature only reshapes what they kept. Temperature <= 0 is greedy.
//!
//! [`Sampler::device_draw`] hands the configurations a GPU implements (greedy; top-k with
//! top-p, min-p and temperature) to a device sampling op, with the same random number.
//!
//! The stream of random numbers is SplitMix64 (see `rng.rs`), not llama.cpp's mt19937, so
//! the same seed gives a reproducible sequence here but not llama.cpp's sequence.

mod candidates;
mod device;
mod dist;
mod error;
mod history;
mod min_p;
mod params;
mod penalties;
mod rng;
mod temperature;
mod top_k;
mod top_n_sigma;
mod top_p;
mod typical;
mod xtc;

#[cfg(test)]
mod tests;

pub use candidates::Candidate;
use candidates::Candidates;
pub use device::DeviceDraw;
pub use error::SamplerError;
pub use params::SamplerParams;
pub use penalties::PenaltyParams;
pub use rng::RANDOM_SEED;
pub use xtc::XtcParams;

use history::History;
use rng::SplitMix64;

/// Arbitrary odd constant separating XTC's random stream from the draw's.
const XTC_STREAM: u64 = 0x5854_435F_5354_524D;

/// A sampler for one sequence: the parameters, the penalty history and the random streams.
#[derive(Debug, Clone)]
pub struct Sampler {
    params: SamplerParams,
    history: History,
    rng: SplitMix64,
    xtc_rng: SplitMix64,
    /// Reused between calls (3 MiB for a 262k vocabulary).
    candidates: Candidates,
}

impl Sampler {
    /// A sampler with an empty history, its random streams seeded from `params.seed`.
    pub fn new(params: SamplerParams) -> Self {
        let (rng, xtc_rng) = streams(params.seed);
        Self {
            params,
            history: History::new(params.penalties.last_n),
            rng,
            xtc_rng,
            candidates: Candidates::default(),
        }
    }

    /// The parameters it was made with.
    pub fn params(&self) -> &SamplerParams {
        &self.params
    }

    /// Draws the next token from one row of logits (one per vocabulary entry). Does not
    /// record it: call [`accept`](Self::accept) with the token actually used, as llama.cpp's
    /// `common_sampler_sample` / `common_sampler_accept` split it.
    pub fn sample(&mut self, logits: &[f32]) -> Result<u32, SamplerError> {
        let u = self.draw_number();
        self.filter(logits)?;
        dist::draw(&mut self.candidates, u)
    }

    /// The draw's uniform number: one per sample when the temperature is positive, taken
    /// before the chain runs whatever it leaves (so a device draw, which takes its number
    /// up front, consumes the stream exactly as this does); none for greedy.
    fn draw_number(&mut self) -> f32 {
        if self.params.temperature > 0.0 {
            self.rng.next_unit24()
        } else {
            0.0
        }
    }

    /// The distribution [`sample`](Self::sample) would draw from: the candidates every stage
    /// kept, after temperature, with `p` normalized over them. Consumes XTC's random number
    /// (when XTC is on) exactly as `sample` would, but not the draw's.
    pub fn distribution(&mut self, logits: &[f32]) -> Result<&[Candidate], SamplerError> {
        self.filter(logits)?;
        if !self.candidates.softmax() {
            return Err(SamplerError::NoFiniteLogits);
        }
        Ok(self.candidates.items())
    }

    /// Records a generated (or prompt) token for the penalties.
    pub fn accept(&mut self, token: u32) {
        self.history.push(token);
    }

    /// Forgets the history and restarts the random streams from the seed (a fresh random
    /// seed for [`RANDOM_SEED`]), as llama.cpp's `llama_sampler_reset`.
    pub fn reset(&mut self) {
        self.history.clear();
        (self.rng, self.xtc_rng) = streams(self.params.seed);
    }

    /// Every stage but the draw.
    fn filter(&mut self, logits: &[f32]) -> Result<(), SamplerError> {
        let p = &self.params;
        let c = &mut self.candidates;
        c.fill(logits)?;
        penalties::penalize(c, &self.history, &p.penalties);
        if !p.is_plain_greedy() {
            top_n_sigma::top_n_sigma(c, p.top_n_sigma);
            top_k::top_k(c, p.top_k);
            typical::typical(c, p.typical_p, p.min_keep);
            top_p::top_p(c, p.top_p, p.min_keep);
            min_p::min_p(c, p.min_p, p.min_keep);
            xtc::xtc(c, &p.xtc, p.min_keep, &mut self.xtc_rng);
        }
        temperature::temperature(c, p.temperature);
        Ok(())
    }
}

/// The draw's stream and XTC's, from one user seed.
fn streams(seed: u32) -> (SplitMix64, SplitMix64) {
    let seed = rng::resolve_seed(seed);
    (SplitMix64::new(seed), SplitMix64::new(seed ^ XTC_STREAM))
}
