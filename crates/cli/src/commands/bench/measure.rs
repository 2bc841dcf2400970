//! The timed work of `rullama bench`: the calls the CLI's generation makes, on one session.
//!
//! Prefill (`ppN`): one `forward_sample` of N prompt tokens at position 0, the prompt path a
//! user's prompt takes (matrix-matrix blocks; the next token drawn from the last row, on the
//! GPU where the executor samples there). Decode (`tgN`): after an untimed prefill of the
//! `-p` prompt (so the KV cache holds that much history; none with `-p 0`), N steps of one
//! token each: the previous draw goes in, the next id comes out (a `Generator`: the step
//! feeding a drawn token is queued before its id is read), as `rullama run` generates
//! without printing. Every repetition
//! rewinds the cache to position 0. The clock stops when the id is back on the host, so the
//! GPU work of each step is inside it.

use std::io::Write;
use std::time::{Duration, Instant};

use rullama_model::sampler::{Sampler, SamplerParams};
use rullama_model::{Backend, DeviceMemory, Generator, HostTimes, Model, Session, StepProfile};
use rullama_tokenizer::Tokenizer;

use crate::commands::CliError;
use crate::commands::generation::ModelTask;

/// What to time.
#[derive(Debug, Clone, Copy)]
pub struct Tests {
    pub n_prompt: usize,
    pub n_gen: usize,
    pub repetitions: usize,
    /// KV cache positions (at least `n_prompt + n_gen`).
    pub ctx: usize,
    pub seed: u32,
    /// The sampler's temperature (0: greedy).
    pub temperature: f32,
    /// Profile the last step after the tests.
    pub profile: bool,
}

/// Wall-clock time of every repetition, and the device memory held after the last.
#[derive(Debug)]
pub struct Measured {
    pub prefill: Vec<Duration>,
    pub decode: Vec<Duration>,
    pub memory: Option<DeviceMemory>,
    /// With `--profile`: where the time of a step goes.
    pub profiles: Profiles,
}

/// GPU time per dispatch of one prefill and one decode step (when asked for and the
/// executor has a timer), and the host time of the last decode repetition.
#[derive(Debug, Default)]
pub struct Profiles {
    pub prefill: Option<StepProfile>,
    pub decode: Option<StepProfile>,
    pub decode_host: Option<HostTimes>,
}

impl Tests {
    /// Replays the step just run with timestamps, when profiling and `ran`.
    fn profile_step<B: Backend>(
        &self,
        session: &mut Session<'_, B>,
        ran: bool,
    ) -> Result<Option<StepProfile>, CliError> {
        if !(self.profile && ran) {
            return Ok(None);
        }
        progress(format_args!("profile"));
        Ok(session.profile_last_step()?)
    }
}

impl ModelTask for Tests {
    type Output = Measured;

    fn run<B: Backend>(self, model: &Model<B>, _: &Tokenizer) -> Result<Measured, CliError> {
        // The session first: a context the machine cannot hold is an error before the
        // prompt's ids are made.
        let mut session = model.session(self.ctx)?;
        // One id more than the prompt: the decode's first input when there is no prompt.
        let ids = random_tokens(
            u64::from(self.seed),
            self.n_prompt + 1,
            model.config().n_vocab,
        );
        let (prompt, first) = ids.split_at(self.n_prompt);
        // llama.cpp's default sampling (top-k 40, top-p 0.95, min-p 0.05) at the given
        // temperature (0.8 by default: what `rullama run` does unless told otherwise; 0 is
        // greedy); on the GPU executor it runs there.
        let mut sampler = Sampler::new(SamplerParams {
            seed: self.seed,
            temperature: self.temperature,
            ..SamplerParams::default()
        });
        let step = Step {
            prompt,
            first: first[0],
        };

        // Warm-up: builds the prefill and decode steps (pipelines, buffers, bind groups) so
        // the timed repetitions replay them as every later call would.
        progress(format_args!("warm-up"));
        let token = step.history(&mut session, &mut sampler)?;
        if self.n_gen > 0 {
            decode(&mut session, token, self.n_prompt, 1, &mut sampler)?;
        }

        let mut prefill = Vec::new();
        if self.n_prompt > 0 {
            for r in 0..self.repetitions {
                progress(format_args!(
                    "pp{} {}/{}",
                    self.n_prompt,
                    r + 1,
                    self.repetitions
                ));
                let start = Instant::now();
                session.forward_sample(prompt, 0, &mut sampler)?;
                prefill.push(start.elapsed());
            }
        }
        let prefill_profile = self.profile_step(&mut session, self.n_prompt > 0)?;
        let mut decode_times = Vec::new();
        let mut host = None;
        if self.n_gen > 0 {
            for r in 0..self.repetitions {
                progress(format_args!(
                    "tg{} {}/{}",
                    self.n_gen,
                    r + 1,
                    self.repetitions
                ));
                let token = step.history(&mut session, &mut sampler)?;
                let start = Instant::now();
                let times = decode(&mut session, token, self.n_prompt, self.n_gen, &mut sampler)?;
                decode_times.push(start.elapsed());
                host = Some(times);
            }
        }
        let decode_profile = self.profile_step(&mut session, self.n_gen > 0)?;
        progress(format_args!("done"));
        let memory = session.model().backend().device_memory();
        Ok(Measured {
            prefill,
            decode: decode_times,
            memory,
            profiles: Profiles {
                prefill: prefill_profile,
                decode: decode_profile,
                decode_host: host.filter(|_| self.profile),
            },
        })
    }
}

/// The prompt and the decode's first input without one.
struct Step<'a> {
    prompt: &'a [u32],
    first: u32,
}

impl Step<'_> {
    /// The untimed start of a decode test: the prompt in the cache from position 0, and the
    /// token the decode feeds first (drawn after the prompt, or `first` without a prompt).
    fn history<B: Backend>(
        &self,
        session: &mut Session<'_, B>,
        sampler: &mut Sampler,
    ) -> Result<u32, CliError> {
        if self.prompt.is_empty() {
            return Ok(self.first);
        }
        Ok(session.forward_sample(self.prompt, 0, sampler)?)
    }
}

/// `n` decode steps at positions `start..start + n` (after the history, rewinding what a
/// previous repetition left), starting by feeding `token`: a [`Generator`], as `rullama run`
/// generates (each step queued before the previous one's id is read).
fn decode<B: Backend>(
    session: &mut Session<'_, B>,
    token: u32,
    start: usize,
    n: usize,
    sampler: &mut Sampler,
) -> Result<HostTimes, CliError> {
    sampler.accept(token);
    let mut tokens = Generator::start(session, &[token], start, n, sampler)?;
    while tokens.next(sampler)?.is_some() {}
    let times = tokens.host_times();
    tokens.finish();
    Ok(times)
}

/// `n` ids uniform over `0..n_vocab` from SplitMix64 seeded with `seed`: random ids as
/// llama-bench feeds, and the same ones on every run and machine so figures compare.
pub fn random_tokens(seed: u64, n: usize, n_vocab: usize) -> Vec<u32> {
    let mut state = seed;
    (0..n)
        .map(|_| {
            state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^= z >> 31;
            // The modulo's bias is below 2^-40 for any real vocabulary.
            (z % n_vocab.max(1) as u64) as u32
        })
        .collect()
}

/// Progress on stderr; a closed stderr must not fail the figures on stdout.
fn progress(what: std::fmt::Arguments<'_>) {
    let _ = writeln!(std::io::stderr(), "bench: {what}");
}

#[cfg(test)]
mod tests {
    #[test]
    fn random_tokens_are_fixed_by_the_seed_and_in_range() {
        let a = super::random_tokens(7, 1000, 49_152);
        assert_eq!(a, super::random_tokens(7, 1000, 49_152));
        assert_ne!(a, super::random_tokens(8, 1000, 49_152));
        assert!(a.iter().all(|&t| t < 49_152));
        // Spread over the vocabulary, not stuck in a corner of it.
        assert!(a.iter().any(|&t| t < 10_000) && a.iter().any(|&t| t > 40_000));
    }
}
