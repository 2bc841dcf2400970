//! `rullama finetune MODEL --data F.jsonl --out ADAPTER.gguf`: trains a LoRA adapter
//! (`rullama_finetune`) and writes it as llama.cpp's LoRA GGUF, which `rullama run --lora`
//! and llama.cpp's `--lora` load.
//!
//! The loop: batches from the data (`--batch` rows, `--grad-accum` of them a step), one
//! AdamW step each, a line of `OUT.log.jsonl` per step, an eval pass every `--eval-every`
//! steps, a checkpoint (`OUT.ckpt.safetensors`), the adapter and the loss curve
//! (`OUT.loss.png`) every `--save-every` steps, at the end, and on Ctrl-C. `--resume`
//! continues from the checkpoint bit for bit. A step whose gradient is not finite is skipped
//! (a warning, `"skipped": true` in its log line, a count in the summary) and the next batch
//! retries it; too many in a row stop the run with an error, the last applied step saved.

mod args;
mod bench;
mod engine;
mod outputs;
mod plot;
mod progress;

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use rullama_finetune::FinetuneError;
use rullama_finetune::checkpoint;
use rullama_finetune::data::{Batch, BatchConfig, Batches, Dataset, Encoder, Layout, pad_id};
use rullama_finetune::memory::{self, TapeMemory};
use rullama_finetune::optim::AdamWConfig;
use rullama_finetune::train::TrainConfig;
use rullama_gguf::{GgufFile, store};
use rullama_model::ModelConfig;
use rullama_model::lora::base::fingerprint;
use rullama_tokenizer::Tokenizer;

use super::CliError;
pub use args::Args;
use args::{check_flags, spec};
use outputs::Outputs;
use progress::{Progress, StepLine};

/// Set by the Ctrl-C handler; checked between steps, so the run saves and stops after the
/// step in flight.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

pub(super) fn usage(msg: impl Into<String>) -> CliError {
    CliError::Usage(msg.into())
}

pub fn run(args: &Args) -> Result<(), CliError> {
    let schedule = check_flags(args)?;
    let spec = spec(args)?;
    if args.bench {
        return bench::run(args, &spec);
    }
    let (Some(data), Some(out)) = (&args.data, &args.out) else {
        return Err(usage(
            "--data and --out name the training data and the adapter",
        ));
    };
    let resolved = store::resolve(&args.model)?;
    let file = GgufFile::open_ranged(&resolved.path)?;
    let cfg = ModelConfig::from_gguf(&file)?;
    check_ctx(args, &cfg)?;
    let tokenizer = Tokenizer::open(&resolved.path)?;
    let encoder = Encoder::new(&tokenizer);
    let train = Dataset::load(data, &encoder, args.ctx)?;
    let (train, eval) = match (&args.eval, args.eval_split) {
        (Some(path), _) => {
            let eval = Dataset::load(path, &encoder, args.ctx)?;
            (train, Some(eval))
        }
        (None, Some(f)) => {
            let (t, e) = train.split_eval(f, args.seed)?;
            (t, Some(e))
        }
        (None, None) => (train, None),
    };
    eprintln!("train: {}", train.summary());
    if let Some(e) = &eval {
        eprintln!("eval:  {}", e.summary());
    }

    let batch_config = BatchConfig {
        batch: args.batch,
        ctx: args.ctx,
        layout: if args.pack {
            Layout::Packed
        } else {
            Layout::Padded
        },
        pad: pad_id(&tokenizer),
        shuffle: true,
        seed: args.seed,
    };
    let fresh = Batches::new(&train, batch_config)?;
    let total = match args.steps {
        Some(s) => s,
        None => {
            let batches: u64 = (0..args.epochs)
                .map(|e| fresh.batches_in_epoch(e) as u64)
                .sum();
            batches.div_ceil(args.grad_accum as u64)
        }
    };
    let eval_batches: Vec<Batch> = match &eval {
        Some(e) => one_pass(
            e,
            BatchConfig {
                shuffle: false,
                ..batch_config
            },
        )?,
        None => Vec::new(),
    };

    let gpu = args.backend.gpu()?;
    if gpu.is_none() {
        check_memory(&file, &cfg, args.rank, &train, eval.as_ref())?;
    }
    let config = TrainConfig {
        optim: AdamWConfig {
            lr: args.lr,
            weight_decay: args.weight_decay,
            max_grad_norm: args.max_grad_norm,
            ..AdamWConfig::default()
        },
        schedule,
        warmup: args.warmup,
        steps: total,
        seed: args.seed,
    };
    let mut models = engine::Models::default();
    let (mut trainer, executor) =
        engine::start(&mut models, gpu, &resolved.path, args, &spec, config)?;
    eprintln!("training on {executor}");
    let ckpt = checkpoint::path_for(out);
    let mut batches = if args.resume {
        let saved = checkpoint::load(&ckpt)?;
        let position = saved.restore_into(&ckpt, &mut trainer)?;
        eprintln!(
            "resumed from {} at step {}",
            ckpt.display(),
            trainer.steps()
        );
        Batches::resume(&train, batch_config, position)?
    } else {
        fresh
    };

    ctrlc::set_handler(|| INTERRUPTED.store(true, Ordering::SeqCst))
        .map_err(|e| usage(format!("installing the Ctrl-C handler: {e}")))?;
    let outputs = Outputs {
        base: fingerprint(file.metadata(), cfg.arch.name()),
        out,
        peft: args.peft.as_deref(),
        cfg: &cfg,
        spec: &spec,
    };
    let mut progress = Progress::new(out, total, trainer.steps(), args.json, args.resume)?;
    let started = Instant::now();
    if !eval_batches.is_empty() && trainer.steps() == 0 {
        // The starting point every later eval loss is read against.
        let before = trainer.eval(&eval_batches)?;
        progress.eval_before(before)?;
    }
    let mut last_eval = None;
    let end = match args.stop_after {
        Some(n) => total.min(trainer.steps().saturating_add(n)),
        None => total,
    };
    while trainer.steps() < end {
        let step_start = Instant::now();
        let group: Vec<Batch> = (0..args.grad_accum).map(|_| batches.next_batch()).collect();
        let report = match trainer.step(&group) {
            // A step whose batches hold nothing to learn (all cut away) is skipped, not an
            // error: the data as a whole was checked to hold trainable tokens.
            Err(FinetuneError::NothingToLearn) => continue,
            // Gradients not finite step after step: the adapter is the last applied step's,
            // saved before the error so that the run's work is kept.
            Err(e @ FinetuneError::NonFiniteGradient { .. }) => {
                outputs.save(&trainer, batches.position(), &progress)?;
                progress.finish();
                eprintln!("saved {} and {}", out.display(), ckpt.display());
                return Err(e.into());
            }
            other => other?,
        };
        let step = report.step;
        // A skipped step (gradient not finite) changed nothing: no eval or save is due, and
        // the next step takes its number.
        let applied = !report.skipped;
        let eval_now = applied
            && !eval_batches.is_empty()
            && (step % args.eval_every.max(1) == 0 || step == total);
        if eval_now {
            last_eval = trainer.eval(&eval_batches)?;
        }
        let line = StepLine {
            step,
            epoch: batches.position().epoch,
            loss: report.loss,
            eval_loss: if eval_now { last_eval } else { None },
            grad_norm: report.grad_norm,
            lr: report.lr,
            tokens: report.tokens,
            seconds: step_start.elapsed().as_secs_f64(),
            skipped: report.skipped,
        };
        progress.step(&line)?;
        let interrupted = INTERRUPTED.load(Ordering::SeqCst);
        if interrupted || (applied && args.save_every > 0 && step % args.save_every == 0) {
            outputs.save(&trainer, batches.position(), &progress)?;
        }
        if interrupted {
            progress.finish();
            eprintln!(
                "interrupted at step {}: saved {} and {}; --resume continues",
                trainer.steps(),
                out.display(),
                ckpt.display()
            );
            return Err(CliError::Interrupted);
        }
    }
    outputs.save(&trainer, batches.position(), &progress)?;
    progress.finish();
    progress.summary(out, &ckpt, last_eval, started.elapsed().as_secs_f64())
}

/// Refuses a context the model was not trained for (or too short to predict anything).
fn check_ctx(args: &Args, cfg: &ModelConfig) -> Result<(), CliError> {
    if args.ctx < 2 || args.ctx > cfg.n_ctx_train {
        return Err(usage(format!(
            "--ctx {} is outside 2..={}, the model's trained context",
            args.ctx, cfg.n_ctx_train
        )));
    }
    Ok(())
}

/// Refuses a run whose longest sequence would not fit the memory the system has now (the
/// tape's estimate, `rullama_finetune::memory`), saying what would fit.
fn check_memory(
    file: &GgufFile<rullama_gguf::RangedFile>,
    cfg: &ModelConfig,
    rank: usize,
    train: &Dataset,
    eval: Option<&Dataset>,
) -> Result<(), CliError> {
    let Some(available) = memory::available() else {
        return Ok(());
    };
    let n_weights: u64 = file.tensors().map(|t| t.n_elements).sum();
    let need = TapeMemory::of(cfg, n_weights, rank);
    let longest = train
        .sequences()
        .iter()
        .chain(eval.map_or(&[][..], |e| e.sequences()))
        .map(|s| s.len())
        .max()
        .unwrap_or(0);
    if need.total(longest) <= available {
        return Ok(());
    }
    let gib = |b: u64| b as f64 / f64::from(1u32 << 30);
    Err(usage(format!(
        "training needs about {:.1} GiB: the weights dequantized ({:.1} GiB) and {:.1} MiB a \
         token for the longest sequence ({longest} tokens); {:.1} GiB are available, enough \
         for sequences of {} tokens: lower --ctx, or train a smaller model",
        gib(need.total(longest)),
        gib(need.weights),
        need.per_token as f64 / f64::from(1u32 << 20),
        gib(available),
        need.max_tokens(available)
    )))
}

/// The batches of one pass over `data` in its order (evaluation).
fn one_pass(data: &Dataset, config: BatchConfig) -> Result<Vec<Batch>, CliError> {
    let mut batches = Batches::new(data, config)?;
    let mut out = Vec::new();
    while batches.position().epoch == 0 {
        out.push(batches.next_batch());
    }
    Ok(out)
}
