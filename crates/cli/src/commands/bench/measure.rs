//! The timed work of `rullama bench`: the calls the CLI's generation makes, on one session.
//!
//! Each test runs after `depth` positions of random ids are in the KV cache (llama-bench's
//! `-d`; none by default). That history is prefilled untimed, in blocks, once for all the
//! tests at a depth: a test writes only positions from its depth on, so the history below
//! stays as it was and every repetition starts from the same cache, as llama-bench's
//! restored state does.
//!
//! Prefill (`ppN`): one `forward_sample` of N prompt tokens at the depth, the prompt path a
//! user's prompt takes (matrix-matrix blocks; the next token drawn from the last row, on the
//! GPU where the executor samples there). Decode (`tgN`): N steps of one token each from the
//! depth on: the previous draw goes in, the next id comes out (a `Generator`: the step
//! feeding a drawn token is queued before its id is read), as `rullama run` generates
//! without printing. Each test runs untimed first (the first run builds that step's
//! pipelines, buffers and bind groups, so the timed repetitions replay them as every later
//! call would), again until [`WARM_UP`] has passed: an idle GPU's clock ramps up under load,
//! and a short test timed right away can run slower throughout (a 70 ms prefill of gemma3-4b
//! at two thirds of its speed, every kernel alike, on an H200 whose clock sat at 345 MHz
//! between processes). The clock stops when the id is back on the host, so the GPU work of
//! each step is inside it.

use std::io::Write;
use std::time::{Duration, Instant};

use rullama_model::sampler::{Sampler, SamplerParams};
use rullama_model::{
    Backend, DeviceMemory, Generator, HostTimes, Model, OutputRows, Session, StepProfile,
};
use rullama_tokenizer::Tokenizer;

use super::plan::{Kind, Test};
use crate::commands::CliError;
use crate::commands::generation::ModelTask;
use crate::commands::validate;

/// The least time a test runs untimed before its repetitions.
const WARM_UP: Duration = Duration::from_secs(1);

/// Runs `run` once, then again until [`WARM_UP`] has passed since the first began.
fn warm_up(mut run: impl FnMut() -> Result<(), CliError>) -> Result<(), CliError> {
    let start = Instant::now();
    run()?;
    while start.elapsed() < WARM_UP {
        run()?;
    }
    Ok(())
}

/// Positions of history a block prefills: llama.cpp's micro-batch, the block it computes a
/// llama-bench depth in. A smaller block than the whole depth keeps a 32k history from
/// needing a 32k-row step (and the scratch memory that step would hold).
const DEPTH_BLOCK: usize = 512;

/// What to time.
#[derive(Debug, Clone)]
pub struct Tests {
    /// In the order they run (see [`super::plan::tests`]).
    pub tests: Vec<Test>,
    pub repetitions: usize,
    /// KV cache positions (at least what the deepest test fills).
    pub ctx: usize,
    pub seed: u32,
    /// The sampler's temperature (0: greedy).
    pub temperature: f32,
    /// Profile the last prefill and the last decode step after their tests.
    pub profile: bool,
}

/// One test's wall-clock time of every repetition, and the FLOPs of one repetition of a
/// prefill ([`rullama_model::ModelConfig::prefill_flops`]).
#[derive(Debug)]
pub struct TestTimes {
    pub test: Test,
    pub times: Vec<Duration>,
    pub flops: Option<u64>,
}

/// Every test's times, and the device memory held after the last.
#[derive(Debug)]
pub struct Measured {
    pub tests: Vec<TestTimes>,
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

impl ModelTask for &Tests {
    type Output = Measured;

    fn run<B: Backend>(self, model: &Model<B>, _: &Tokenizer) -> Result<Measured, CliError> {
        // The session first: a context the machine cannot hold is an error before the ids
        // are made.
        let mut session = model.session(self.ctx)?;
        // A context past the training context runs, as `run --ctx` does, with the warning it
        // gives once the cache is made (a context that cannot be made is only an error).
        validate::warn_beyond_training(model.config(), self.ctx);
        // One id for every position a test fills: the history is `ids[..d]` and a test at
        // depth d feeds the ids from d on (a decode feeds `ids[d]` first), so at depth 0
        // the prompt is the same ids whatever the depths.
        let positions = self.tests.iter().filter_map(Test::positions).max();
        let ids = random_tokens(
            u64::from(self.seed),
            positions.unwrap_or(0),
            model.config().n_vocab,
        );
        // llama.cpp's default sampling (top-k 40, top-p 0.95, min-p 0.05) at the given
        // temperature (0.8 by default: what `rullama run` does unless told otherwise; 0 is
        // greedy); on the GPU executor it runs there.
        let mut sampler = Sampler::new(SamplerParams {
            seed: self.seed,
            temperature: self.temperature,
            ..SamplerParams::default()
        });
        let last = |kind| self.tests.iter().rposition(|t| t.kind == kind);
        let (last_prefill, last_decode) = (last(Kind::Prefill), last(Kind::Decode));

        // Positions from 0 that hold the history `ids[..filled]`.
        let mut filled = 0;
        let mut measured = Vec::new();
        let mut profiles = Profiles::default();
        for (i, &test) in self.tests.iter().enumerate() {
            if filled < test.depth {
                progress(format_args!("depth {}", test.depth));
                fill(&mut session, &ids[..test.depth], filled)?;
            }
            filled = test.depth;
            let name = test.name();
            let d = test.depth;
            let n = test.n_tokens;
            progress(format_args!("warm-up {name}"));
            let mut times = Vec::new();
            match test.kind {
                Kind::Prefill => {
                    let prompt = &ids[d..d + n];
                    warm_up(|| {
                        session.forward_sample(prompt, d, &mut sampler)?;
                        Ok(())
                    })?;
                    for r in 0..self.repetitions {
                        progress(format_args!("{name} {}/{}", r + 1, self.repetitions));
                        let start = Instant::now();
                        session.forward_sample(prompt, d, &mut sampler)?;
                        times.push(start.elapsed());
                    }
                    if self.profile && Some(i) == last_prefill {
                        profiles.prefill = profile_step(&mut session)?;
                    }
                }
                Kind::Decode => {
                    warm_up(|| {
                        decode(&mut session, ids[d], d, 1, &mut sampler)?;
                        Ok(())
                    })?;
                    for r in 0..self.repetitions {
                        progress(format_args!("{name} {}/{}", r + 1, self.repetitions));
                        let start = Instant::now();
                        let host = decode(&mut session, ids[d], d, n, &mut sampler)?;
                        times.push(start.elapsed());
                        if self.profile && Some(i) == last_decode {
                            profiles.decode_host = Some(host);
                        }
                    }
                    if self.profile && Some(i) == last_decode {
                        profiles.decode = profile_step(&mut session)?;
                    }
                }
            }
            let flops = (test.kind == Kind::Prefill).then(|| model.config().prefill_flops(d, n));
            measured.push(TestTimes { test, times, flops });
        }
        progress(format_args!("done"));
        let memory = session.model().backend().device_memory();
        Ok(Measured {
            tests: measured,
            memory,
            profiles,
        })
    }
}

/// Replays the step just run with timestamps.
fn profile_step<B: Backend>(session: &mut Session<'_, B>) -> Result<Option<StepProfile>, CliError> {
    progress(format_args!("profile"));
    Ok(session.profile_last_step()?)
}

/// Prefills the history `ids` from position `from` on (what is below it is in the cache
/// already), [`DEPTH_BLOCK`] positions a step.
fn fill<B: Backend>(
    session: &mut Session<'_, B>,
    ids: &[u32],
    from: usize,
) -> Result<(), CliError> {
    let mut start = from;
    for block in ids[from..].chunks(DEPTH_BLOCK) {
        session.forward(block, start, OutputRows::Last)?;
        start += block.len();
    }
    Ok(())
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
