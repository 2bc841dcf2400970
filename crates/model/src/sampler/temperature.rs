//! Temperature, as llama.cpp's `llama_sampler_temp_impl`: divide the logits by `temp`;
//! `temp <= 0` is greedy and keeps only the best candidate (ties to the lowest id, where
//! llama.cpp takes the first in its current order).

use super::candidates::{Candidates, sanitize};

pub(super) fn temperature(c: &mut Candidates, temp: f32) {
    if temp <= 0.0 {
        if let Some(best) = c.argmax() {
            c.keep_only(best);
        }
        return;
    }
    if temp == 1.0 {
        return;
    }
    // Order is preserved for temp > 0, so the sorted flag stays. inf / temp stays inf;
    // sanitize only guards a NaN temperature.
    for x in c.items_mut() {
        x.logit = sanitize(x.logit / temp);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn divides_logits() {
        let mut c = Candidates::from_logits(&[1.0, -2.0, 0.5]).unwrap();
        temperature(&mut c, 0.5);
        let l: Vec<f32> = c.items().iter().map(|x| x.logit).collect();
        assert_eq!(l, [2.0, -4.0, 1.0]);
    }

    #[test]
    fn sharpens_and_flattens() {
        let probs = |t: f32| {
            let mut c = Candidates::from_logits(&[1.0, 0.0]).unwrap();
            temperature(&mut c, t);
            c.softmax();
            c.items()[0].p
        };
        assert!(probs(0.5) > probs(1.0) && probs(1.0) > probs(2.0));
    }

    #[test]
    fn zero_or_negative_is_greedy_with_ties_to_lowest_id() {
        for t in [0.0, -1.0] {
            let mut c = Candidates::from_logits(&[0.0, 3.0, 1.0, 3.0]).unwrap();
            temperature(&mut c, t);
            assert_eq!(c.len(), 1);
            assert_eq!(c.items()[0].id, 1);
        }
    }
}
