//! `cargo xtask parity --models`: the real models against the exact-f32 oracle
//! (`data/oracle/`), through the library's own session, tokenizer and perplexity code.
//!
//! Per model, three checks: every greedy prompt token for token up to the oracle's `tie_at`;
//! every log-prob prompt's top 10 within [`LOGPROB_BAR`] nats; the perplexity of the oracle's
//! text over `--chunks` chunks within [`PPL_BAR`] of `ppl_f32` (with `--cache-type f16`, the
//! default mode, f16 KV cache and prompt matmuls on the tensor cores where the GPU has them,
//! against its bars [`LOGPROB_BAR_F16`] and [`PPL_BAR_F16`]; compared only when the chunk
//! count is the oracle's: another count is another figure; `--q8-inputs`, decode matvecs on
//! int8-rounded inputs, is held to the same bars). Minutes per model on 2 cores, so
//! it is not part of the default `cargo xtask parity`.

use std::io::Write;
use std::path::Path;
use std::time::Instant;

use rullama_gguf::store;
use rullama_kernels::Gpu;
use rullama_model::cpu::WeightStorage;
use rullama_model::gpu::{GpuOptions, KvDtype};
use rullama_model::logits::log_softmax;
use rullama_model::perplexity::{self, Chunks};
use rullama_model::{Backend, CpuBackend, GpuBackend, Model};
use rullama_tokenizer::{EncodeOptions, Tokenizer};

use super::oracle::Oracle;

/// The bars for an engine that computes in f32 everywhere (`--cache-type f32`).
const LOGPROB_BAR: f64 = 0.01;
const PPL_BAR: f64 = 0.001;
/// The text-generation issue's fidelity bars for the default mode, whose f16 KV cache rounds
/// every cached key and value and whose tensor-core prompt matmuls round weights and
/// activations to f16 (`--cache-type f16`, what `rullama run` uses).
const LOGPROB_BAR_F16: f64 = 0.05;
const PPL_BAR_F16: f64 = 0.005;

/// The GPU executor's KV cache type (the CPU executor is always f32).
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CacheType {
    F16,
    #[default]
    F32,
}

/// The bars (top-10 log-prob nats, perplexity relative error) for a mode: the exact ones
/// unless the GPU rounds something (an f16 cache, int8 decode inputs).
fn bars(opts: &Options) -> (f64, f64) {
    let rounded = opts.cache == CacheType::F16 || opts.q8_inputs;
    match opts.backend {
        BackendChoice::Gpu if rounded => (LOGPROB_BAR_F16, PPL_BAR_F16),
        _ => (LOGPROB_BAR, PPL_BAR),
    }
}

/// Which executor runs the models.
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum BackendChoice {
    /// The GPU executor on the adapter `RULLAMA_ADAPTER` picks (a software one included).
    #[default]
    Gpu,
    /// The CPU reference executor, weights dequantized at load.
    Cpu,
}

/// What `--models` was asked.
#[derive(Debug, Clone)]
pub struct Options {
    pub model: Option<String>,
    pub backend: BackendChoice,
    pub cache: CacheType,
    /// Decode matvecs on int8-rounded inputs (GPU only).
    pub q8_inputs: bool,
    pub chunks: usize,
}

enum Verdict {
    Pass,
    Fail,
    /// Measured but with no oracle figure to hold it to.
    NotCompared,
}

struct Row {
    check: &'static str,
    cases: String,
    worst: String,
    bar: String,
    verdict: Verdict,
}

/// Runs the checks on each model; returns the number of checks that failed.
pub fn run(root: &Path, opts: &Options) -> Result<usize, String> {
    let names: Vec<&str> = match &opts.model {
        Some(name) => {
            let known = store::KNOWN_MODELS.iter().any(|m| m.name == name);
            if !known {
                let all: Vec<&str> = store::KNOWN_MODELS.iter().map(|m| m.name).collect();
                return Err(format!("unknown model {name} (known: {})", all.join(", ")));
            }
            vec![name.as_str()]
        }
        None => store::KNOWN_MODELS.iter().map(|m| m.name).collect(),
    };
    println!(
        "{:<14} {:<11} {:>22} {:>30} {:>16}  result",
        "model", "check", "cases", "worst", "bar"
    );
    let mut failures = 0;
    for name in names {
        let oracle = Oracle::load(root, name)?;
        let path = store::cached_test_model(name)
            .ok_or_else(|| format!("{name} is not cached: run `cargo xtask models`"))?;
        let tokenizer = Tokenizer::open(&path).map_err(|e| format!("{name}: {e}"))?;
        let checked = Checked {
            name,
            oracle: &oracle,
            tokenizer: &tokenizer,
            chunks: opts.chunks,
            bars: bars(opts),
        };
        failures += match opts.backend {
            BackendChoice::Cpu => {
                let backend = CpuBackend::new().with_storage(WeightStorage::Dense);
                checked.run(&open(&path, backend)?)?
            }
            BackendChoice::Gpu => {
                let gpu = Gpu::open().map_err(|e| e.to_string())?;
                eprintln!(
                    "{name}: GPU executor on {} ({:?})",
                    gpu.info.name, gpu.info.backend
                );
                let kv_dtype = match opts.cache {
                    CacheType::F16 => KvDtype::F16,
                    CacheType::F32 => KvDtype::F32,
                };
                // The f16 mode is `rullama run`'s default: f16 cache and tensor cores (where
                // the GPU has them); the f32 mode is exact f32 everywhere.
                let options = GpuOptions {
                    kv_dtype,
                    tensor_cores: opts.cache == CacheType::F16,
                    q8_inputs: opts.q8_inputs,
                    ..GpuOptions::default()
                };
                let backend = GpuBackend::new(gpu).with_options(options);
                checked.run(&open(&path, backend)?)?
            }
        };
    }
    Ok(failures)
}

fn open<B: Backend>(path: &Path, backend: B) -> Result<Model<B>, String> {
    Model::open(path, backend).map_err(|e| format!("loading {}: {e}", path.display()))
}

/// One check of one model: a row of the table.
type Check<C, B> = fn(&C, &Model<B>) -> Result<Row, String>;

/// One model's checks, whatever its executor.
struct Checked<'a> {
    name: &'a str,
    oracle: &'a Oracle,
    tokenizer: &'a Tokenizer,
    chunks: usize,
    /// Top-10 log-prob bar (nats) and perplexity bar (relative).
    bars: (f64, f64),
}

impl Checked<'_> {
    /// Runs and prints the three checks; returns how many failed.
    fn run<B: Backend>(&self, model: &Model<B>) -> Result<usize, String> {
        let mut failures = 0;
        let checks: [Check<Self, B>; 3] = [Self::greedy, Self::logprobs, Self::perplexity];
        for check in checks {
            let t = Instant::now();
            let row = check(self, model)?;
            let result = match row.verdict {
                Verdict::Pass => "pass",
                Verdict::Fail => {
                    failures += 1;
                    "FAIL"
                }
                Verdict::NotCompared => "not compared",
            };
            println!(
                "{:<14} {:<11} {:>22} {:>30} {:>16}  {result} ({:.1} s)",
                self.name,
                row.check,
                row.cases,
                row.worst,
                row.bar,
                t.elapsed().as_secs_f64()
            );
        }
        Ok(failures)
    }

    /// Every greedy prompt, compared token for token before `tie_at`.
    fn greedy<B: Backend>(&self, model: &Model<B>) -> Result<Row, String> {
        let (mut tokens, mut differ) = (0, 0);
        for case in &self.oracle.greedy {
            let n = case.tie_at.min(case.ids.len());
            tokens += n;
            if n == 0 {
                continue;
            }
            let mut session = model
                .session(case.prompt_ids.len() + n)
                .map_err(|e| e.to_string())?;
            let got = session
                .greedy(&case.prompt_ids, n)
                .map_err(|e| format!("{} {:?}: {e}", self.name, case.prompt))?;
            if let Some(at) = got.iter().zip(&case.ids).position(|(a, b)| a != b) {
                differ += 1;
                println!(
                    "    {} {:?}: token {at} is {} where the oracle has {}",
                    self.name, case.prompt, got[at], case.ids[at]
                );
            }
        }
        Ok(Row {
            check: "greedy",
            cases: format!("{} prompts, {tokens} tok", self.oracle.greedy.len()),
            worst: format!("{differ} differ"),
            bar: "= up to tie_at".into(),
            verdict: verdict(differ == 0),
        })
    }

    /// Every log-prob prompt: the largest |Δ| over the oracle's top 10.
    fn logprobs<B: Backend>(&self, model: &Model<B>) -> Result<Row, String> {
        let mut worst = 0f64;
        for case in &self.oracle.logprobs {
            let mut session = model
                .session(case.prompt_ids.len())
                .map_err(|e| e.to_string())?;
            let logits = session
                .feed(&case.prompt_ids)
                .map_err(|e| format!("{} {:?}: {e}", self.name, case.prompt))?;
            let lp = log_softmax(&logits);
            for &(id, want) in &case.top10 {
                let got = lp.get(id as usize).ok_or_else(|| {
                    format!("{}: oracle token {id} is outside the vocabulary", self.name)
                })?;
                worst = worst.max((got - want).abs());
            }
        }
        Ok(Row {
            check: "logprobs",
            cases: format!("{} prompts", self.oracle.logprobs.len()),
            worst: format!("{worst:.3e} nats"),
            bar: format!("< {} nats", self.bars.0),
            verdict: verdict(worst < self.bars.0),
        })
    }

    /// llama-perplexity's method over the oracle's text, against `ppl_f32`.
    fn perplexity<B: Backend>(&self, model: &Model<B>) -> Result<Row, String> {
        let want = &self.oracle.perplexity;
        let file = self.oracle.dir.join(&want.text_file);
        let text = std::fs::read_to_string(&file)
            .map_err(|e| format!("reading {}: {e}", file.display()))?;
        let tokens = self.tokenizer.encode(
            &text,
            EncodeOptions {
                add_special: true,
                parse_special: false,
            },
        );
        let bos = self
            .tokenizer
            .add_bos()
            .then(|| self.tokenizer.bos())
            .flatten();
        let chunks = Chunks {
            tokens: &tokens,
            ctx: want.ctx,
            n_chunks: self.chunks,
            bos,
        };
        let mut err = std::io::stderr();
        let total = perplexity::score(model, chunks, |i, total| {
            // Progress only, as llama-perplexity prints it.
            let _ = write!(err, "[{}]{:.4},", i + 1, total.ppl());
            let _ = err.flush();
        })
        .map_err(|e| format!("{} perplexity: {e}", self.name))?;
        let _ = writeln!(err);
        let ppl = total.ppl();
        let rel = (ppl - want.ppl_f32).abs() / want.ppl_f32;
        let compared = self.chunks == want.chunks;
        Ok(Row {
            check: "perplexity",
            cases: format!("{} chunks of {}", self.chunks, want.ctx),
            worst: if compared {
                format!("{ppl:.4} vs {:.4}: {:.2e}", want.ppl_f32, rel)
            } else {
                format!("{ppl:.4}")
            },
            bar: if compared {
                format!("rel < {:e}", self.bars.1)
            } else {
                format!("oracle: {} chunks", want.chunks)
            },
            verdict: if compared {
                verdict(rel < self.bars.1)
            } else {
                Verdict::NotCompared
            },
        })
    }
}

fn verdict(pass: bool) -> Verdict {
    if pass { Verdict::Pass } else { Verdict::Fail }
}
