//! Properties of the whole chain, the statistics of the draw, and the speed on a real-size
//! vocabulary. Each stage's own semantics are tested in its file.

use proptest::prelude::*;

use super::candidates::Candidates;
use super::rng::SplitMix64;
use super::*;

/// The reference greedy: NaN as -inf, highest logit, ties to the lowest id.
fn argmax(logits: &[f32]) -> Option<u32> {
    let mut best: Option<(usize, f32)> = None;
    for (i, &l) in logits.iter().enumerate() {
        let l = if l.is_nan() { f32::NEG_INFINITY } else { l };
        if best.is_none_or(|(_, b)| l > b) {
            best = Some((i, l));
        }
    }
    best.filter(|&(_, l)| l > f32::NEG_INFINITY)
        .map(|(i, _)| i as u32)
}

/// Logits with the occasional NaN and infinity; few distinct values so ties happen.
fn logits() -> impl Strategy<Value = Vec<f32>> {
    let one = prop_oneof![
        10 => (-40i32..40).prop_map(|x| x as f32 * 0.5),
        1 => Just(f32::NAN),
        1 => Just(f32::NEG_INFINITY),
        1 => Just(f32::INFINITY),
    ];
    prop::collection::vec(one, 1..120)
}

prop_compose! {
    fn params()(
        seed in 0u32..1000,
        temperature in -0.5f32..2.0,
        top_k in -5i32..60,
        top_p in 0.0f32..1.2,
        min_p in 0.0f32..0.6,
        typical_p in 0.2f32..1.3,
        top_n_sigma in -1.0f32..3.0,
        min_keep in 0usize..5,
        last_n in 0usize..16,
        repeat in 0.5f32..2.0,
        frequency in -1.0f32..2.0,
        presence in -1.0f32..2.0,
        xtc_probability in 0.0f32..1.0,
        xtc_threshold in 0.0f32..0.6,
    ) -> SamplerParams {
        SamplerParams {
            seed, temperature, top_k, top_p, min_p, typical_p, top_n_sigma, min_keep,
            penalties: PenaltyParams { last_n, repeat, frequency, presence },
            xtc: XtcParams { probability: xtc_probability, threshold: xtc_threshold },
        }
    }
}

prop_compose! {
    /// Configurations the GPU sampling op implements (temperature <= 0: greedy).
    fn device_params()(
        seed in 0u32..1000,
        temperature in -0.5f32..2.0,
        top_k in 1i32..=rullama_kernels::ops::sample::K_MAX as i32,
        top_p in 0.0f32..1.2,
        min_p in 0.0f32..0.6,
        min_keep in 0usize..5,
    ) -> SamplerParams {
        SamplerParams {
            seed, temperature, top_k, top_p, min_p, min_keep,
            penalties: PenaltyParams { last_n: 0, ..PenaltyParams::default() },
            ..SamplerParams::default()
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// The GPU op's CPU reference (in the kernels crate, which cannot see this one) is this
    /// sampler: the same id for the same logits and the same random number, exactly.
    #[test]
    fn matches_the_gpu_reference(logits in logits(), params in device_params()) {
        use rullama_kernels::ops::sample::{K_MAX, Sampling, sample_ref};
        let mut s = Sampler::new(params);
        let d = s.clone().device_draw(K_MAX).expect("a device configuration");
        let op = Sampling {
            top_k: d.top_k,
            top_p: d.top_p,
            min_p: d.min_p,
            min_keep: d.min_keep,
            temperature: d.temperature,
        };
        prop_assert_eq!(s.sample(&logits).ok(), sample_ref(&logits, &op, d.u).id);
    }

    #[test]
    fn sampled_token_has_nonzero_probability(
        logits in logits(),
        params in params(),
        seen in prop::collection::vec(0u32..120, 0..20),
    ) {
        let mut a = Sampler::new(params);
        let mut b = Sampler::new(params);
        seen.iter().for_each(|&t| { a.accept(t); b.accept(t); });
        let finite = logits.iter().any(|&l| l > f32::NEG_INFINITY);
        match (a.distribution(&logits), b.sample(&logits)) {
            (Ok(dist), Ok(token)) => {
                let kept = dist.iter().find(|c| c.id == token);
                prop_assert!(kept.is_some_and(|c| c.p > 0.0), "{token} not drawable in {dist:?}");
                let total: f32 = dist.iter().map(|c| c.p).sum();
                prop_assert!((total - 1.0).abs() < 1e-3);
            }
            (Err(e), Err(f)) => {
                prop_assert_eq!(&e, &f);
                prop_assert!(!finite, "{e} with a finite logit");
            }
            (x, y) => prop_assert!(false, "distribution {x:?} vs sample {y:?}"),
        }
    }

    #[test]
    fn greedy_is_argmax(logits in logits(), seed in any::<u32>()) {
        let mut s = Sampler::new(SamplerParams { seed, ..SamplerParams::greedy() });
        prop_assert_eq!(s.sample(&logits).ok(), argmax(&logits));
    }

    /// The greedy fast path skips top-n-sigma, top-k, top-p and min-p: check they never
    /// remove the best token, so skipping them is exact.
    #[test]
    fn skipped_filters_keep_the_argmax(logits in logits(), params in params()) {
        let Ok(mut c) = Candidates::from_logits(&logits) else { return Ok(()) };
        top_n_sigma::top_n_sigma(&mut c, params.top_n_sigma);
        top_k::top_k(&mut c, params.top_k);
        top_p::top_p(&mut c, params.top_p, params.min_keep);
        min_p::min_p(&mut c, params.min_p, params.min_keep);
        temperature::temperature(&mut c, 0.0);
        prop_assert_eq!(Some(c.items()[0].id), argmax(&logits));
    }

    #[test]
    fn top_k_one_is_greedy(logits in logits(), params in params()) {
        let params = SamplerParams {
            top_k: 1,
            temperature: params.temperature.abs() + 0.1,
            penalties: PenaltyParams { last_n: 0, ..params.penalties },
            ..params
        };
        prop_assert_eq!(Sampler::new(params).sample(&logits).ok(), argmax(&logits));
    }

    #[test]
    fn same_seed_same_sequence(logits in logits(), params in params()) {
        let run = |s: &mut Sampler| -> Vec<Option<u32>> {
            (0..16).map(|_| {
                let t = s.sample(&logits).ok();
                if let Some(t) = t { s.accept(t); }
                t
            }).collect()
        };
        let mut a = Sampler::new(params);
        let first = run(&mut a);
        prop_assert_eq!(&first, &run(&mut Sampler::new(params)));
        a.reset();
        prop_assert_eq!(&first, &run(&mut a));
    }
}

/// Empirical frequencies of `n` draws from `logits` (temperature `temp`, no filters) against
/// `expected`: each within 5 standard errors sqrt(p(1-p)/n). The seed is fixed, so this is
/// deterministic; for a fresh seed a false alarm would have probability about 6e-7 per token.
fn check_frequencies(logits: &[f32], temp: f32, expected: &[f64]) {
    let n = 200_000;
    let mut s = Sampler::new(SamplerParams {
        seed: 12345,
        temperature: temp,
        top_k: 0,
        top_p: 1.0,
        min_p: 0.0,
        ..SamplerParams::default()
    });
    let mut counts = vec![0usize; logits.len()];
    for _ in 0..n {
        counts[s.sample(logits).unwrap() as usize] += 1;
    }
    for (i, (&k, &p)) in counts.iter().zip(expected).enumerate() {
        let freq = k as f64 / n as f64;
        let se = (p * (1.0 - p) / n as f64).sqrt();
        assert!(
            (freq - p).abs() <= 5.0 * se,
            "token {i}: frequency {freq:.5}, probability {p:.5}, 5 s.e. = {:.5}",
            5.0 * se
        );
    }
}

#[test]
fn draws_follow_the_distribution() {
    let probs = [0.5, 0.25, 0.125, 0.0625, 0.0625];
    let logits: Vec<f32> = probs.iter().map(|p: &f64| p.ln() as f32).collect();
    check_frequencies(&logits, 1.0, &probs);

    // Temperature 2 takes square roots of the probabilities before renormalizing.
    let roots: Vec<f64> = probs.iter().map(|p| p.sqrt()).collect();
    let sum: f64 = roots.iter().sum();
    let flattened: Vec<f64> = roots.iter().map(|r| r / sum).collect();
    check_frequencies(&logits, 2.0, &flattened);
}

#[test]
fn penalties_use_the_accepted_history_and_reset_clears_it() {
    let mut s = Sampler::new(SamplerParams {
        penalties: PenaltyParams {
            last_n: 4,
            repeat: 1.1,
            ..PenaltyParams::default()
        },
        ..SamplerParams::greedy()
    });
    let logits = [2.0, 1.9];
    assert_eq!(s.sample(&logits), Ok(0));
    s.accept(0);
    // 2.0 / 1.1 = 1.82 < 1.9.
    assert_eq!(s.sample(&logits), Ok(1));
    s.reset();
    assert_eq!(s.sample(&logits), Ok(0));
}

#[test]
fn degenerate_logits_are_errors() {
    let mut s = Sampler::new(SamplerParams::default());
    assert_eq!(s.sample(&[]), Err(SamplerError::EmptyLogits));
    assert_eq!(
        s.sample(&[f32::NAN, f32::NEG_INFINITY]),
        Err(SamplerError::NoFiniteLogits)
    );
    assert_eq!(s.sample(&[f32::NAN, 0.0, f32::NAN]), Ok(1));
}

/// `cargo test --release -p rullama-model sampler -- --ignored --nocapture`. The 5 ms bound
/// is only asserted in an optimized build.
#[test]
#[ignore = "timing; run in release"]
fn sample_262k_is_fast() {
    let n_vocab = 262_144;
    let mut rng = SplitMix64::new(1);
    // Roughly normal logits, sd ~3 (sum of four uniforms), like a real model's.
    let logits: Vec<f32> = (0..n_vocab)
        .map(|_| (0..4).map(|_| rng.next_unit24()).sum::<f32>() * 6.0 - 12.0)
        .collect();
    // The bound is for the default chain and greedy. With top-k off, these logits put ~27k
    // tokens in the 0.95 nucleus (a flat distribution no trained model produces), which must
    // be sorted: timed for information only.
    let cases = [
        (
            "default chain",
            true,
            SamplerParams {
                seed: 1,
                ..SamplerParams::default()
            },
        ),
        ("greedy", true, SamplerParams::greedy()),
        (
            "top-k off",
            false,
            SamplerParams {
                seed: 1,
                top_k: 0,
                ..SamplerParams::default()
            },
        ),
    ];
    for (name, bounded, params) in cases {
        let mut s = Sampler::new(params);
        for t in 0..64 {
            s.accept(t * 97);
        }
        let mut times: Vec<f64> = (0..50)
            .map(|_| {
                let start = std::time::Instant::now();
                let t = s.sample(&logits).unwrap();
                std::hint::black_box(t);
                start.elapsed().as_secs_f64() * 1e3
            })
            .collect();
        times.sort_by(f64::total_cmp);
        let median = times[times.len() / 2];
        println!(
            "{name}: median {median:.3} ms, max {:.3} ms",
            times[times.len() - 1]
        );
        if bounded && !cfg!(debug_assertions) {
            assert!(median < 5.0, "{name}: {median} ms");
        }
    }
}
