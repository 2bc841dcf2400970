//! The final draw, as llama.cpp's `llama_sampler_dist_apply`: softmax over what the stages
//! left, then inverse-CDF sampling with one uniform number.

use super::SamplerError;
use super::candidates::Candidates;
use super::rng::SplitMix64;

pub(super) fn draw(c: &mut Candidates, rng: &mut SplitMix64) -> Result<u32, SamplerError> {
    // One candidate: llama.cpp returns it without consuming a random number (so greedy
    // leaves the stream untouched).
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
    let target = rng.next_f64() * total;
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
            let t = draw(&mut c, &mut rng).unwrap();
            assert!(t == 1 || t == 3);
        }
    }

    #[test]
    fn single_candidate_uses_no_randomness() {
        let mut rng = SplitMix64::new(3);
        let mut c = Candidates::from_logits(&[2.0]).unwrap();
        assert_eq!(draw(&mut c, &mut rng), Ok(0));
        assert_eq!(rng.next_u64(), SplitMix64::new(3).next_u64());
    }

    #[test]
    fn dominant_token_wins() {
        let mut rng = SplitMix64::new(9);
        let mut c = Candidates::from_logits(&[0.0, 100.0, 0.0]).unwrap();
        assert_eq!(draw(&mut c, &mut rng), Ok(1));
    }
}
