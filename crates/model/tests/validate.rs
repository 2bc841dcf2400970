//! The one validation every front end shares (`SamplerParams::validate`,
//! `validate::check_context`), fed random numbers with the edges mixed in: 0, -0, negatives,
//! NaN, the infinities, the largest values. It accepts exactly the documented ranges, names
//! the first value out of range, and whatever it accepts the sampler runs without a panic.

use proptest::prelude::*;
use rullama_model::sampler::{PenaltyParams, Sampler, SamplerError, SamplerParams, XtcParams};
use rullama_model::validate::{MAX_CTX, Param, check_context};

/// Any f32, with the edges as likely as the rest.
fn number() -> impl Strategy<Value = f32> {
    prop_oneof![
        Just(0.0f32),
        Just(-0.0),
        Just(1.0),
        Just(-1.0),
        Just(0.5),
        Just(f32::NAN),
        Just(f32::INFINITY),
        Just(f32::NEG_INFINITY),
        Just(f32::MAX),
        Just(f32::MIN),
        Just(f32::MIN_POSITIVE),
        Just(u64::MAX as f32),
        -3.0f32..3.0,
        any::<f32>(),
    ]
}

/// Any count, `u64::MAX` and 0 among them.
fn count() -> impl Strategy<Value = usize> {
    prop_oneof![
        Just(0usize),
        Just(1),
        Just(usize::MAX),
        Just(u64::MAX as usize),
        Just(u32::MAX as usize),
        Just(u32::MAX as usize + 1),
        0usize..100,
        any::<usize>(),
    ]
}

fn top_k() -> impl Strategy<Value = i32> {
    prop_oneof![
        Just(0),
        Just(-1),
        Just(i32::MIN),
        Just(i32::MAX),
        -50i32..50,
        any::<i32>()
    ]
}

prop_compose! {
    fn any_params()(
        seed in any::<u32>(),
        temperature in number(),
        top_k in top_k(),
        top_p in number(),
        min_p in number(),
        typical_p in number(),
        top_n_sigma in number(),
        min_keep in count(),
        last_n in count(),
        repeat in number(),
        frequency in number(),
        presence in number(),
        probability in number(),
        threshold in number(),
    ) -> SamplerParams {
        SamplerParams {
            seed, temperature, top_k, top_p, min_p, typical_p, top_n_sigma, min_keep,
            penalties: PenaltyParams { last_n, repeat, frequency, presence },
            xtc: XtcParams { probability, threshold },
        }
    }
}

/// A number from `range` or one of its edges.
fn within(
    edges: &'static [f32],
    range: std::ops::RangeInclusive<f32>,
) -> impl Strategy<Value = f32> {
    prop_oneof![prop::sample::select(edges), range]
}

prop_compose! {
    /// Values inside every range, edges included: what the sampler must take.
    fn valid_params()(
        seed in any::<u32>(),
        temperature in within(&[0.0, -0.0, f32::MIN_POSITIVE, f32::MAX], 0.0..=5.0),
        top_k in prop_oneof![Just(0), Just(i32::MAX), 0i32..80],
        top_p in within(&[0.0, 1.0], 0.0..=1.0),
        min_p in within(&[0.0, 1.0], 0.0..=1.0),
        typical_p in within(&[0.0, 1.0], 0.0..=1.0),
        top_n_sigma in within(&[0.0, f32::MAX, f32::MIN], -3.0..=3.0),
        min_keep in count(),
        last_n in count(),
        repeat in within(&[f32::MIN_POSITIVE, f32::MAX, 1.0], 0.01..=5.0),
        frequency in within(&[0.0, f32::MAX, f32::MIN], -3.0..=3.0),
        presence in within(&[0.0, f32::MAX, f32::MIN], -3.0..=3.0),
        probability in within(&[0.0, 1.0], 0.0..=1.0),
        threshold in within(&[0.0, 1.0], 0.0..=1.0),
    ) -> SamplerParams {
        SamplerParams {
            seed, temperature, top_k, top_p, min_p, typical_p, top_n_sigma, min_keep,
            penalties: PenaltyParams { last_n, repeat, frequency, presence },
            xtc: XtcParams { probability, threshold },
        }
    }
}

/// The documented ranges, spelled out independently of the code under test: the first
/// value outside its range, in `validate`'s order.
fn first_invalid(p: &SamplerParams) -> Option<Param> {
    let unit = |v: f32| (0.0..=1.0).contains(&v);
    let checks = [
        (
            Param::Temperature,
            p.temperature.is_finite() && p.temperature >= 0.0,
        ),
        (Param::TopK, p.top_k >= 0),
        (Param::TopP, unit(p.top_p)),
        (Param::MinP, unit(p.min_p)),
        (Param::TypicalP, unit(p.typical_p)),
        (Param::TopNSigma, p.top_n_sigma.is_finite()),
        (
            Param::RepeatPenalty,
            p.penalties.repeat.is_finite() && p.penalties.repeat > 0.0,
        ),
        (Param::FrequencyPenalty, p.penalties.frequency.is_finite()),
        (Param::PresencePenalty, p.penalties.presence.is_finite()),
        (Param::XtcProbability, unit(p.xtc.probability)),
        (Param::XtcThreshold, unit(p.xtc.threshold)),
    ];
    checks.iter().find(|(_, ok)| !ok).map(|(param, _)| *param)
}

/// Finite logits of a small vocabulary.
fn logits() -> impl Strategy<Value = Vec<f32>> {
    prop::collection::vec(-20.0f32..20.0, 1..64)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// Accepted exactly when every value is in its range; the error names the first one out
    /// of range and shows the value as given.
    #[test]
    fn sampler_values_are_accepted_exactly_in_range(p in any_params()) {
        match (p.validate(), first_invalid(&p)) {
            (Ok(()), None) => {}
            (Err(e), Some(param)) => {
                prop_assert_eq!(e.param, param);
                prop_assert!(e.to_string().starts_with(param.name()), "{}", e);
                prop_assert!(e.to_string().contains(param.range()), "{}", e);
            }
            (got, want) => prop_assert!(false, "validate {:?}, expected {:?}", got, want),
        }
    }

    /// Whatever passes, the sampler takes: on finite logits it draws a token of the
    /// vocabulary or reports that none has a probability (a temperature so small that every
    /// logit divided by it overflows), never panics; with an ordinary temperature it always
    /// draws. Penalties apply to the history, so the sampler is fed a few tokens first.
    #[test]
    fn accepted_values_never_break_the_sampler(p in valid_params(), logits in logits()) {
        prop_assert_eq!(p.validate(), Ok(()));
        let mut sampler = Sampler::new(p);
        for t in 0..4u32 {
            sampler.accept(t % logits.len() as u32);
        }
        let ordinary = p.temperature == 0.0 || p.temperature >= 0.01;
        let penalties_finite = [p.penalties.repeat, p.penalties.frequency, p.penalties.presence]
            .iter()
            .all(|v| v.abs() < 1e3 && (v.abs() > 1e-3 || *v == 0.0));
        match sampler.sample(&logits) {
            Ok(id) => prop_assert!((id as usize) < logits.len()),
            Err(SamplerError::NoFiniteLogits) => prop_assert!(
                !(ordinary && penalties_finite),
                "no token drawn with ordinary values {:?}", p
            ),
            Err(e) => prop_assert!(false, "{}", e),
        }
    }

    /// A context is 1 to u32::MAX positions, whatever number is asked for.
    #[test]
    fn contexts_are_accepted_exactly_in_range(n in count()) {
        prop_assert_eq!(check_context(n).is_ok(), (1..=MAX_CTX).contains(&n));
        if let Err(e) = check_context(n) {
            prop_assert_eq!(e.param, Param::Context);
            prop_assert_eq!(e.value, n.to_string());
        }
    }
}

#[test]
fn defaults_and_greedy_are_valid() {
    assert_eq!(SamplerParams::default().validate(), Ok(()));
    assert_eq!(SamplerParams::greedy().validate(), Ok(()));
}

/// The values the issue found accepted by `run` (each alone, the rest llama.cpp's defaults).
#[test]
fn the_reported_values_are_rejected() {
    let with = |f: fn(&mut SamplerParams)| {
        let mut p = SamplerParams::default();
        f(&mut p);
        p.validate().unwrap_err().param
    };
    assert_eq!(with(|p| p.temperature = -1.0), Param::Temperature);
    assert_eq!(with(|p| p.temperature = f32::NAN), Param::Temperature);
    assert_eq!(with(|p| p.top_p = 2.0), Param::TopP);
    assert_eq!(with(|p| p.min_p = -0.5), Param::MinP);
    assert_eq!(with(|p| p.top_k = -5), Param::TopK);
    assert_eq!(with(|p| p.penalties.repeat = 0.0), Param::RepeatPenalty);
    assert_eq!(with(|p| p.penalties.repeat = -1.0), Param::RepeatPenalty);
    assert_eq!(
        with(|p| p.penalties.repeat = f32::NAN),
        Param::RepeatPenalty
    );
    let p = SamplerParams {
        temperature: -1.0,
        ..SamplerParams::default()
    };
    assert_eq!(
        p.validate().unwrap_err().to_string(),
        "temperature = -1 is out of range: it takes a finite number >= 0 (0 is greedy)"
    );
}
