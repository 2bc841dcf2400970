//! The final draw, as llama.cpp's `llama_sampler_dist_apply`: softmax over what the stages
//! left, then inverse-CDF sampling with one uniform number `u` in [0, 1).
//!
//! The caller takes `u` from the stream before the chain runs (see `Sampler::sample`), so
//! a draw left with one candidate still uses up its number, unlike llama.cpp: the GPU draw
//! must receive its number before anything tells the host how many candidates survive, and
//! both executors must take the same numbers from one seed.

use super::SamplerError;
use super::candidates::Candidates;

pub(super) fn draw(c: &mut Candidates, u: f32) -> Result<u32, SamplerError> {
    if let [only] = c.items() {
        return if only.logit == f32::NEG_INFINITY {
            Err(SamplerError::NoFiniteLogits)
        } else {
            Ok(only.id)
        };
    }
    if !c.softmax() {
        return Err(SamplerError::NoFiniteLogits);
    }
    let total: f64 = c.items().iter().map(|x| f64::from(x.p)).sum();
    let target = f64::from(u) * total;
    // Strictly greater: with target in [0, total), a zero-probability token can never be
    // the first to push the running sum past it.
    let mut cum = 0.0f64;
    for x in c.items() {
        cum += f64::from(x.p);
        if cum > target {
            return Ok(x.id);
        }
    }
    // Rounding left the sum short of the target: take the last token that can be drawn.
    c.items()
        .iter()
        .rev()
        .find(|x| x.p > 0.0)
        .map(|x| x.id)
        .ok_or(SamplerError::NoFiniteLogits)
}

#[cfg(test)]
mod tests {
    use super::super::rng::SplitMix64;
    use super::*;

    #[test]
    fn never_draws_a_zero_probability_token() {
        let mut rng = SplitMix64::new(3);
        let logits = [
            f32::NEG_INFINITY,
            0.0,
            f32::NEG_INFINITY,
            0.0,
            f32::NEG_INFINITY,
        ];
        for _ in 0..1000 {
            let mut c = Candidates::from_logits(&logits).unwrap();
            let t = draw(&mut c, rng.next_unit24()).unwrap();
            assert!(t == 1 || t == 3);
        }
    }

    #[test]
    fn single_candidate_whatever_u() {
        for u in [0.0, 0.5, 0.999_999_9] {
            let mut c = Candidates::from_logits(&[2.0]).unwrap();
            assert_eq!(draw(&mut c, u), Ok(0));
        }
    }

    #[test]
    fn dominant_token_wins() {
        let mut c = Candidates::from_logits(&[0.0, 100.0, 0.0]).unwrap();
        assert_eq!(draw(&mut c, 0.999_999_9), Ok(1));
    }

    /// Equal probabilities: u picks the quarter it falls in.
    #[test]
    fn u_selects_by_cumulative_probability() {
        for (u, want) in [(0.0, 0), (0.2499, 0), (0.25, 1), (0.6, 2), (0.9999, 3)] {
            let mut c = Candidates::from_logits(&[1.0; 4]).unwrap();
            assert_eq!(draw(&mut c, u), Ok(want), "u {u}");
        }
    }
}
