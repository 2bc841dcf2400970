//! Repetition, frequency and presence penalties over the last N accepted tokens, as
//! llama.cpp's `llama_sampler_penalties_apply`: for a token seen `count` times,
//! the logit is divided by `repeat` when positive and multiplied by it when <= 0 (dividing a
//! negative logit would make the token *more* likely), then
//! `count * frequency + presence` is subtracted.

use super::candidates::{Candidates, sanitize};
use super::history::History;

/// The penalties' settings, with llama.cpp's defaults (all off).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PenaltyParams {
    /// How many of the last accepted tokens count; 0 disables every penalty. llama.cpp: 64.
    pub last_n: usize,
    /// Repetition penalty; 1.0 is off. llama.cpp: 1.0.
    pub repeat: f32,
    /// Subtracted once per occurrence; 0 is off. llama.cpp: 0.
    pub frequency: f32,
    /// Subtracted once if the token occurs at all; 0 is off. llama.cpp: 0.
    pub presence: f32,
}

impl Default for PenaltyParams {
    fn default() -> Self {
        Self {
            last_n: 64,
            repeat: 1.0,
            frequency: 0.0,
            presence: 0.0,
        }
    }
}

impl PenaltyParams {
    pub(super) fn is_off(&self) -> bool {
        self.last_n == 0 || (self.repeat == 1.0 && self.frequency == 0.0 && self.presence == 0.0)
    }
}

pub(super) fn penalize(c: &mut Candidates, history: &History, params: &PenaltyParams) {
    if params.is_off() || history.is_empty() {
        return;
    }
    for (id, count) in history.counts() {
        let Some(cand) = find(c, id) else { continue };
        let l = cand.logit;
        let l = if l <= 0.0 {
            l * params.repeat
        } else {
            l / params.repeat
        };
        // A zero or negative penalty can turn ±inf or 0 into NaN: keep the no-NaN invariant.
        cand.logit = sanitize(l - (count as f32 * params.frequency + params.presence));
    }
    c.set_unsorted();
}

/// The candidate for `id`: direct indexing while the list is still the whole vocabulary in
/// id order (always, since penalties run first), a scan otherwise.
fn find(c: &mut Candidates, id: u32) -> Option<&mut super::Candidate> {
    let items = c.items_mut();
    let i = id as usize;
    if items.get(i).is_some_and(|x| x.id == id) {
        return items.get_mut(i);
    }
    items.iter_mut().find(|x| x.id == id)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(logits: &[f32], seen: &[u32], params: PenaltyParams) -> Vec<f32> {
        let mut h = History::new(params.last_n);
        seen.iter().for_each(|&t| h.push(t));
        let mut c = Candidates::from_logits(logits).unwrap();
        penalize(&mut c, &h, &params);
        c.items().iter().map(|c| c.logit).collect()
    }

    #[test]
    fn repeat_divides_positive_and_multiplies_negative() {
        let params = PenaltyParams {
            repeat: 2.0,
            ..Default::default()
        };
        let out = run(&[4.0, -4.0, 4.0, 0.0], &[0, 1, 0, 3], params);
        // Count does not matter for the repetition penalty; token 2 was never seen.
        assert_eq!(out, [2.0, -8.0, 4.0, 0.0]);
    }

    #[test]
    fn frequency_and_presence_subtract() {
        let params = PenaltyParams {
            frequency: 0.5,
            presence: 1.0,
            ..Default::default()
        };
        let out = run(&[4.0, 4.0, 4.0], &[0, 0, 0, 1], params);
        assert_eq!(out, [4.0 - 1.5 - 1.0, 4.0 - 0.5 - 1.0, 4.0]);
    }

    #[test]
    fn only_the_last_n_count() {
        let params = PenaltyParams {
            last_n: 2,
            frequency: 1.0,
            ..Default::default()
        };
        // Token 0 left the window of 2.
        assert_eq!(run(&[0.0, 0.0, 0.0], &[0, 1, 2], params), [0.0, -1.0, -1.0]);
    }

    #[test]
    fn defaults_change_nothing_and_nan_cannot_appear() {
        assert_eq!(
            run(&[1.0, -1.0], &[0, 1], PenaltyParams::default()),
            [1.0, -1.0]
        );
        let params = PenaltyParams {
            repeat: 0.0,
            ..Default::default()
        };
        let out = run(&[f32::NEG_INFINITY, 1.0], &[0, 1], params);
        // -inf * 0 is NaN, stored as -inf; 1 / 0 is +inf.
        assert_eq!(out, [f32::NEG_INFINITY, f32::INFINITY]);
    }
}
