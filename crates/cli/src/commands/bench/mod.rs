//! `rullama bench MODEL`: llama-bench's prefill (`ppN`) and decode (`tgN`) speeds, at a depth
//! of history where asked (`ppN @ dD`), on the executor a user's generation runs on, with the
//! prefills' TFLOP/s and the device memory it holds.
//!
//! [`plan`] lists the tests the flags ask for; [`measure`] times the real calls; [`report`]
//! prints them. The prompts and the history are random token ids from a fixed seed (as
//! llama-bench feeds random ids), so runs compare.

mod measure;
mod plan;
mod report;

use std::io::Write;
use std::num::NonZeroUsize;

use rullama_gguf::{GgufFile, store};

use rullama_model::sampler::SamplerParams;
use rullama_model::validate::check_context;

use super::generation::{self, BackendChoice, GpuFlags};
use super::lora::LoraArg;
use super::{CliError, validate};
use measure::Tests;
use report::{ModelInfo, Report, TestResult};

/// Flags of `rullama bench` (its help text is on the subcommand in `main.rs`).
#[derive(clap::Args)]
pub struct Args {
    /// A GGUF path, an Ollama name (`gemma3:270m`) or a cached test model (`gemma3-270m`).
    model: String,
    /// Prompt tokens of the prefill tests, a comma-separated list (`-p 512,8192`): each size
    /// its own test (`ppN`); 0 leaves it out.
    #[arg(
        short = 'p',
        long = "n-prompt",
        value_delimiter = ',',
        default_value = "512"
    )]
    n_prompt: Vec<usize>,
    /// Tokens of the decode tests, a comma-separated list (`-n 128,256`): each size its own
    /// test (`tgN`); 0 leaves it out.
    #[arg(
        short = 'n',
        long = "n-gen",
        value_delimiter = ',',
        default_value = "128"
    )]
    n_gen: Vec<usize>,
    /// Positions of history in the KV cache before each test, a comma-separated list
    /// (`-d 0,4096`): every test runs at every depth (`pp512 @ d4096`); the history's
    /// prefill is not timed.
    #[arg(
        short = 'd',
        long = "n-depth",
        value_delimiter = ',',
        default_value = "0"
    )]
    n_depth: Vec<usize>,
    /// Timed repetitions of each test (after an untimed warm-up of at least a second).
    #[arg(short = 'r', long = "repetitions", default_value_t = 3)]
    repetitions: usize,
    /// KV cache positions; at least the largest depth + test (the default), at most
    /// 4294967295.
    #[arg(long, value_parser = generation::ctx_parser())]
    ctx: Option<usize>,
    /// Seed of the random prompt ids and of the sampler's draws.
    #[arg(long, default_value_t = 42)]
    seed: u32,
    /// Temperature of the sampler every step runs: llama.cpp's default chain (top-k 40,
    /// top-p 0.95, min-p 0.05) at this temperature; 0 is greedy (the largest logit), as
    /// llama-server runs with `"temperature": 0`.
    #[arg(long, default_value_t = 0.8, allow_negative_numbers = true)]
    temp: f64,
    /// Which executor runs the model (`cpu`: the reference executor, for comparison).
    #[arg(long, value_enum, default_value_t = BackendChoice::Gpu)]
    backend: BackendChoice,
    /// CPU threads for the reference executor, at least 1 (default: all cores).
    #[arg(long, value_parser = generation::threads_parser())]
    threads: Option<usize>,
    /// The GPU executor's KV cache type and tensor cores (f16 cache and tensor cores by
    /// default: llama.cpp's defaults, as llama-bench runs it).
    #[command(flatten)]
    gpu: GpuFlags,
    /// The most tokens one step feeds (llama-bench's `-ub`): a longer prompt runs as steps
    /// of this many (default 4096; fewer where the GPU's largest buffer binding needs).
    #[arg(long)]
    ubatch: Option<NonZeroUsize>,
    /// A LoRA adapter to apply: a llama.cpp LoRA GGUF or a PEFT directory, at scale 1 or
    /// the one after `:`; repeat for several (llama-bench has none: the figures are the
    /// adapted model's).
    #[arg(long = "lora", value_name = "FILE[:SCALE]")]
    lora: Vec<LoraArg>,
    /// Print the results as one JSON object, with one object per test (for scripts).
    #[arg(long)]
    json: bool,
    /// After the tests, replay the last prefill and the last decode step (of the tests run):
    /// with a timestamp after every dispatch (the time per kernel), timed around the pass
    /// only (the step's real GPU time), and without each kernel's dispatches (what it costs
    /// with its launches); also the host's time a decode token spends recording, submitting
    /// and waiting.
    #[arg(long)]
    profile: bool,
}

pub fn run(args: &Args) -> Result<(), CliError> {
    let tests = check(args)?;
    let path = store::resolve(&args.model)?.path;
    let model = ModelInfo::of(&GgufFile::open(&path)?);
    let mut loaded = generation::load_on(
        &args.model,
        args.backend,
        args.threads,
        args.gpu,
        generation::Tuning {
            ubatch: args.ubatch,
            lora: &args.lora,
        },
    )?;
    let measured = loaded.run(&tests)?;
    let results = measured
        .tests
        .into_iter()
        .map(|t| TestResult {
            name: t.test.name(),
            kind: t.test.kind.as_str(),
            n_tokens: t.test.n_tokens,
            depth: t.test.depth,
            flops: t.flops,
            times: t.times,
        })
        .collect();
    let report = Report {
        model_name: path
            .file_name()
            .map_or_else(|| args.model.clone(), |n| n.to_string_lossy().into_owned()),
        model,
        backend: match loaded.engine {
            generation::Engine::Gpu(_) => "gpu",
            generation::Engine::Cpu(_) => "cpu",
        },
        executor: loaded.executor.clone(),
        ctx: tests.ctx,
        seed: tests.seed,
        temperature: args.temp,
        repetitions: tests.repetitions,
        load_time: loaded.load_time,
        tests: results,
        memory: measured.memory,
        profiles: measured.profiles,
    };
    let mut out = std::io::stdout().lock();
    if args.json {
        writeln!(out, "{}", report.json())?;
    } else {
        report.markdown(&mut out)?;
    }
    Ok(())
}

/// The flags as tests, or what is wrong with them (before the model is loaded).
fn check(args: &Args) -> Result<Tests, CliError> {
    if args.repetitions == 0 {
        return Err(CliError::Usage("-r must be at least 1".into()));
    }
    let tests = plan::tests(&args.n_prompt, &args.n_gen, &args.n_depth);
    if tests.is_empty() {
        return Err(CliError::Usage(
            "every -p and -n is 0: nothing to measure".into(),
        ));
    }
    let needed = plan::positions_needed(&tests)?;
    // The sampler's values pass the check every command shares (only the temperature is a
    // flag here; an f64 that rounds to an f32 out of range is caught as that f32).
    let sampler = SamplerParams {
        temperature: args.temp as f32,
        ..SamplerParams::default()
    };
    sampler.validate()?;
    let ctx = args.ctx.unwrap_or(needed);
    if ctx < needed {
        let deepest = tests
            .iter()
            .find(|t| t.positions() == Some(needed))
            .map_or_else(String::new, |t| format!(" ({})", t.name()));
        return Err(CliError::Usage(format!(
            "--ctx {ctx} is too small: the tests need {needed} positions{deepest}, the largest \
             -d + -p or -n"
        )));
    }
    check_context(ctx)?;
    if let Some(threads) = args.threads {
        validate::warn_threads(threads);
    }
    Ok(Tests {
        tests,
        repetitions: args.repetitions,
        ctx,
        seed: args.seed,
        temperature: args.temp as f32,
        profile: args.profile,
    })
}
