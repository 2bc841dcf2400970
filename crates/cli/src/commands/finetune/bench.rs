//! `rullama finetune MODEL --bench`: training speed on random sequences, with nothing read
//! or written but the model. The first step builds the GPU's step for the shape and is not
//! timed (as a warm-up); the rest are, each a whole optimizer step (forward, loss, backward,
//! AdamW) with its loss read back.

use std::time::{Duration, Instant};

use rullama_finetune::data::{Batch, Span, SplitMix64};
use rullama_finetune::lora::LoraSpec;
use rullama_finetune::optim::{AdamWConfig, Schedule};
use rullama_finetune::train::TrainConfig;
use rullama_gguf::{GgufFile, store};
use rullama_kernels::StepProfile;
use rullama_model::ModelConfig;

use super::super::CliError;
use super::{Args, check_ctx, engine};

/// Steps timed when --steps is not given.
const DEFAULT_STEPS: u64 = 10;

pub fn run(args: &Args, spec: &LoraSpec) -> Result<(), CliError> {
    let resolved = store::resolve(&args.model)?;
    let file = GgufFile::open_ranged(&resolved.path)?;
    let cfg = ModelConfig::from_gguf(&file)?;
    check_ctx(args, &cfg)?;
    let steps = args.steps.unwrap_or(DEFAULT_STEPS);
    let config = TrainConfig {
        optim: AdamWConfig {
            lr: args.lr,
            ..AdamWConfig::default()
        },
        schedule: Schedule::Constant,
        warmup: 0,
        steps: steps + 1,
        seed: args.seed,
    };
    let gpu = args.backend.gpu()?;
    let mut models = engine::Models::default();
    let (mut trainer, executor) =
        engine::start(&mut models, gpu, &resolved.path, args, spec, config)?;
    let batch = random_batch(args.batch, args.ctx, cfg.n_vocab, args.seed);
    let group = vec![batch; args.grad_accum];
    let first = trainer.step(&group)?;
    let start = Instant::now();
    let mut last = first;
    for _ in 0..steps {
        last = trainer.step(&group)?;
    }
    let seconds = start.elapsed().as_secs_f64();
    let tokens = (args.batch * args.grad_accum * args.ctx) as u64 * steps;
    let tok_s = tokens as f64 / seconds;
    let gib = trainer
        .device_bytes()
        .map(|b| b as f64 / f64::from(1u32 << 30));
    if args.json {
        let line = serde_json::json!({
            "model": args.model,
            "executor": executor,
            "rank": args.rank,
            "batch": args.batch,
            "grad_accum": args.grad_accum,
            "ctx": args.ctx,
            "steps": steps,
            "seconds": seconds,
            "tokens_per_second": tok_s,
            "device_gib": gib,
            "loss_first": first.loss,
            "loss_last": last.loss,
        });
        println!("{line}");
    } else {
        println!(
            "finetune bench: {} on {executor}, rank {}, batch {} x {} tokens, {steps} steps",
            args.model, args.rank, args.batch, args.ctx
        );
        let memory = gib.map_or("host memory".to_string(), |g| {
            format!("{g:.2} GiB on the device")
        });
        println!(
            "  {tok_s:.0} tokens/s, {memory}; loss {:.3} -> {:.3}",
            first.loss, last.loss
        );
    }
    if args.profile {
        print_profile(&mut trainer)?;
    }
    Ok(())
}

/// The last step's time per kernel, largest first.
fn print_profile(trainer: &mut rullama_finetune::train::Trainer<'_>) -> Result<(), CliError> {
    let Some(profile) = trainer.profile()? else {
        println!("  (no device timer: --profile needs the GPU)");
        return Ok(());
    };
    let total = profile.total().as_secs_f64();
    println!(
        "  step {:.2} ms unprofiled, {:.2} ms summed over {} dispatches",
        profile.step.as_secs_f64() * 1e3,
        total * 1e3,
        profile.dispatches.len()
    );
    for row in profile.by_kernel() {
        let t = row.total.as_secs_f64();
        println!(
            "  {:>8.2} ms {:>5.1}% {:>5}x  {}",
            t * 1e3,
            100.0 * t / total.max(1e-12),
            row.count,
            row.kernel
        );
    }
    println!("  the {SHAPES_SHOWN} largest (kernel, grid of workgroups) groups:");
    for (name, grid, count, t) in by_grid(&profile).into_iter().take(SHAPES_SHOWN) {
        let t = t.as_secs_f64();
        println!(
            "  {:>8.2} ms {:>5}x {:>8.1} us each  {name} {}x{}x{}",
            t * 1e3,
            count,
            t * 1e6 / count as f64,
            grid[0],
            grid[1],
            grid[2]
        );
    }
    Ok(())
}

/// How many (kernel, grid) groups `--profile` lists.
const SHAPES_SHOWN: usize = 40;

/// The step's time per (kernel, grid of workgroups), largest first: one kernel's time split
/// by the shapes it ran at.
fn by_grid(profile: &StepProfile) -> Vec<(String, [u32; 3], usize, Duration)> {
    let mut rows: Vec<(String, [u32; 3], usize, Duration)> = Vec::new();
    for ((kernel, t), grid) in profile.dispatches.iter().zip(&profile.grids) {
        let name = kernel.name();
        match rows.iter_mut().find(|r| r.0 == name && r.1 == *grid) {
            Some(r) => {
                r.2 += 1;
                r.3 += *t;
            }
            None => rows.push((name, *grid, 1, *t)),
        }
    }
    rows.sort_by_key(|r| std::cmp::Reverse(r.3));
    rows
}

/// `rows` sequences of `width` random token ids, every token after the first a target.
fn random_batch(rows: usize, width: usize, n_vocab: usize, seed: u64) -> Batch {
    let mut rng = SplitMix64::new(seed);
    let tokens = (0..rows * width)
        .map(|_| rng.below(n_vocab) as u32)
        .collect();
    let mask = (0..rows * width).map(|i| i % width != 0).collect();
    Batch {
        rows,
        width,
        tokens,
        mask,
        spans: vec![
            vec![Span {
                start: 0,
                len: width
            }];
            rows
        ],
        examples: (0..rows).collect(),
    }
}
