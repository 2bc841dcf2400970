//! The part of the chain a device samples by itself (the GPU executor's sampling op): greedy,
//! or top-k (1..=the device's maximum) -> top-p -> min-p -> temperature -> draw. Anything else
//! (penalties, typical-p, XTC, top-n-sigma, top-k off or larger) needs the logits on the host.

use super::Sampler;

/// What a device needs to draw the next token as [`Sampler::sample`] would: the values of
/// its stages and the draw's uniform number, already taken from this sampler's stream.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DeviceDraw {
    /// 1.. (greedy: 1).
    pub top_k: usize,
    /// Top-p's cumulative probability; >= 1 is off.
    pub top_p: f32,
    /// Min-p's fraction of the best token's probability; <= 0 is off.
    pub min_p: f32,
    /// The fewest tokens top-p and min-p may leave.
    pub min_keep: usize,
    /// <= 0: greedy.
    pub temperature: f32,
    /// In [0, 1), a multiple of 2^-24 (0 for greedy, which draws nothing).
    pub u: f32,
}

impl Sampler {
    /// The device draw for the next token when the configuration is one a device op with top-k
    /// up to `k_max` implements, taking the draw's random number exactly as
    /// [`Sampler::sample`] would; then call [`Sampler::accept`] with the token as usual. None:
    /// sample the logits on the host with [`Sampler::sample`] (no number taken).
    pub fn device_draw(&mut self, k_max: usize) -> Option<DeviceDraw> {
        let p = &self.params;
        if !p.penalties.is_off() {
            return None;
        }
        if p.is_plain_greedy() {
            return Some(DeviceDraw {
                top_k: 1,
                top_p: 1.0,
                min_p: 0.0,
                min_keep: 0,
                temperature: 0.0,
                u: 0.0,
            });
        }
        let top_k = usize::try_from(p.top_k).ok()?;
        // Every other stage off; NaN or infinite values keep their CPU meaning on the CPU.
        let supported = (1..=k_max).contains(&top_k)
            && p.typical_p >= 1.0
            && p.xtc.is_off()
            && p.top_n_sigma <= 0.0
            && p.temperature > 0.0
            && [p.temperature, p.top_p, p.min_p]
                .iter()
                .all(|v| v.is_finite());
        if !supported {
            return None;
        }
        let (top_p, min_p, min_keep, temperature) = (p.top_p, p.min_p, p.min_keep, p.temperature);
        Some(DeviceDraw {
            top_k,
            top_p,
            min_p,
            min_keep,
            temperature,
            u: self.draw_number(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::{PenaltyParams, SamplerParams, XtcParams};
    use super::*;

    fn seeded() -> SamplerParams {
        SamplerParams {
            seed: 7,
            penalties: PenaltyParams {
                last_n: 0,
                ..PenaltyParams::default()
            },
            ..SamplerParams::default()
        }
    }

    #[test]
    fn which_configurations_go_to_the_device() {
        let on = |p: SamplerParams| Sampler::new(p).device_draw(128).is_some();
        assert!(on(seeded()));
        assert!(on(SamplerParams::greedy()));
        // llama.cpp's defaults keep a repeat penalty of 1.0 over 64 tokens: that is off.
        assert!(on(SamplerParams {
            seed: 7,
            ..SamplerParams::default()
        }));
        let off = [
            SamplerParams {
                top_k: 0,
                ..seeded()
            },
            SamplerParams {
                top_k: 129,
                ..seeded()
            },
            SamplerParams {
                typical_p: 0.9,
                ..seeded()
            },
            SamplerParams {
                top_n_sigma: 1.0,
                ..seeded()
            },
            SamplerParams {
                xtc: XtcParams {
                    probability: 0.5,
                    threshold: 0.1,
                },
                ..seeded()
            },
            SamplerParams {
                penalties: PenaltyParams {
                    repeat: 1.1,
                    ..PenaltyParams::default()
                },
                ..seeded()
            },
            SamplerParams {
                top_p: f32::NAN,
                ..seeded()
            },
        ];
        for p in off {
            assert!(!on(p), "{p:?}");
        }
    }

    /// The device draw takes the number `sample` would take: a sampler that alternates
    /// between the two stays on one stream.
    #[test]
    fn device_draws_take_the_samplers_numbers() {
        let logits = [0.5f32, 0.1, 0.3, 0.2, 0.4];
        let mut a = Sampler::new(seeded());
        let mut b = Sampler::new(seeded());
        let mut us = Vec::new();
        for _ in 0..4 {
            us.push(a.device_draw(128).unwrap().u);
            b.sample(&logits).unwrap();
        }
        // After four draws each, both streams are at the same place.
        assert_eq!(a.sample(&logits), b.sample(&logits));
        assert!(us.windows(2).all(|w| w[0] != w[1]));
        // Greedy takes none.
        let mut g = Sampler::new(SamplerParams::greedy());
        assert_eq!(g.device_draw(128).unwrap().u, 0.0);
    }
}
