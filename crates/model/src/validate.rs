//! The one check of the numbers a user gives for sampling and generation, shared by every
//! front end (the CLI's commands now, a server later) and run before a model loads.
//!
//! [`SamplerParams::validate`](crate::sampler::SamplerParams::validate) checks the sampler's
//! values and [`check_context`] a context length; both name the value as a [`Param`], which
//! each front end spells its own way (a flag, a JSON field). The ranges are those where
//! llama.cpp gives the value a meaning (`common/arg.cpp`, `src/llama-sampling.cpp`), without
//! its quiet fix-ups: llama.cpp clamps a negative temperature to 0 and runs a repeat penalty
//! of 0 (a division by zero); here both are errors, as is NaN anywhere.
//!
//! What depends on the model or the machine (a context past the training context, a KV cache
//! larger than memory) is checked where those are known: [`crate::Model::session`] and the
//! executors' `new_sequence`.

/// The largest context a session may hold: positions are `u32` on every executor (the GPU's
/// position buffers, GGUF's `context_length`).
pub const MAX_CTX: usize = u32::MAX as usize;

/// A value a user sets, as named in an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Param {
    /// The sampler's temperature.
    Temperature,
    /// Top-k: how many of the likeliest tokens stay.
    TopK,
    /// Top-p (nucleus): the probability mass kept.
    TopP,
    /// Min-p: the least probability kept, relative to the likeliest token's.
    MinP,
    /// Locally typical sampling's mass.
    TypicalP,
    /// Top-n-sigma: logits kept within n standard deviations of the largest.
    TopNSigma,
    /// The penalty of tokens repeated from the recent window.
    RepeatPenalty,
    /// The penalty per earlier occurrence of a token.
    FrequencyPenalty,
    /// The penalty of a token that occurred at all.
    PresencePenalty,
    /// XTC's probability of removing the top choices.
    XtcProbability,
    /// XTC's threshold of a top choice.
    XtcThreshold,
    /// Positions of a session's KV cache.
    Context,
}

impl Param {
    /// Every value, for front ends that map each to their own name (and their tests).
    pub const ALL: [Param; 12] = [
        Param::Temperature,
        Param::TopK,
        Param::TopP,
        Param::MinP,
        Param::TypicalP,
        Param::TopNSigma,
        Param::RepeatPenalty,
        Param::FrequencyPenalty,
        Param::PresencePenalty,
        Param::XtcProbability,
        Param::XtcThreshold,
        Param::Context,
    ];

    /// The name Ollama's `options` give it (llama-server's JSON uses the same words, but
    /// `n_ctx` for the context).
    pub fn name(self) -> &'static str {
        match self {
            Param::Temperature => "temperature",
            Param::TopK => "top_k",
            Param::TopP => "top_p",
            Param::MinP => "min_p",
            Param::TypicalP => "typical_p",
            Param::TopNSigma => "top_n_sigma",
            Param::RepeatPenalty => "repeat_penalty",
            Param::FrequencyPenalty => "frequency_penalty",
            Param::PresencePenalty => "presence_penalty",
            Param::XtcProbability => "xtc_probability",
            Param::XtcThreshold => "xtc_threshold",
            Param::Context => "num_ctx",
        }
    }

    /// The values it takes, in words (what an error says).
    pub fn range(self) -> &'static str {
        match self {
            Param::Temperature => "a finite number >= 0 (0 is greedy)",
            Param::TopK => "an integer >= 0 (0 keeps every token)",
            Param::TopP => "a number from 0 to 1 (1 is off)",
            Param::MinP => "a number from 0 to 1 (0 is off)",
            Param::TypicalP => "a number from 0 to 1 (1 is off)",
            Param::TopNSigma => "a finite number (<= 0 is off)",
            Param::RepeatPenalty => "a finite number > 0 (1 is off)",
            Param::FrequencyPenalty | Param::PresencePenalty => "a finite number (0 is off)",
            Param::XtcProbability => "a number from 0 to 1 (0 is off)",
            Param::XtcThreshold => "a number from 0 to 1 (above 0.5 is off)",
            Param::Context => "from 1 to 4294967295 positions",
        }
    }
}

/// A value outside its [`Param`]'s range.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{} = {value} is out of range: it takes {}", param.name(), param.range())]
pub struct InvalidParam {
    /// Which value.
    pub param: Param,
    /// The value as given (printed as Rust prints it: `NaN`, `-1`).
    pub value: String,
}

impl InvalidParam {
    fn new(param: Param, value: impl ToString) -> InvalidParam {
        InvalidParam {
            param,
            value: value.to_string(),
        }
    }
}

/// `Ok` when `ok(value)`, else the error naming `param`.
pub(crate) fn require(param: Param, value: f32, ok: bool) -> Result<(), InvalidParam> {
    if ok {
        Ok(())
    } else {
        Err(InvalidParam::new(param, value))
    }
}

/// In `[0, 1]` (NaN is not).
pub(crate) fn unit(param: Param, value: f32) -> Result<(), InvalidParam> {
    require(param, value, (0.0..=1.0).contains(&value))
}

/// A finite number.
pub(crate) fn finite(param: Param, value: f32) -> Result<(), InvalidParam> {
    require(param, value, value.is_finite())
}

/// A non-negative top-k.
pub(crate) fn top_k(value: i32) -> Result<(), InvalidParam> {
    if value >= 0 {
        Ok(())
    } else {
        Err(InvalidParam::new(Param::TopK, value))
    }
}

/// A session's context: 1 to [`MAX_CTX`] positions (whether its KV cache fits the machine is
/// the executor's check, when it allocates).
pub fn check_context(n_ctx: usize) -> Result<(), InvalidParam> {
    if (1..=MAX_CTX).contains(&n_ctx) {
        Ok(())
    } else {
        Err(InvalidParam::new(Param::Context, n_ctx))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contexts_from_one_to_u32_max() {
        assert!(check_context(0).is_err());
        assert!(check_context(1).is_ok());
        assert!(check_context(MAX_CTX).is_ok());
        let err = check_context(usize::MAX).unwrap_err();
        assert_eq!(err.param, Param::Context);
        assert_eq!(
            err.to_string(),
            format!(
                "num_ctx = {} is out of range: it takes from 1 to 4294967295 positions",
                usize::MAX
            )
        );
        assert_eq!(
            MAX_CTX.to_string(),
            "4294967295",
            "Param::Context's range text"
        );
    }
}
