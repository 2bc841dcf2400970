//! `rullama finetune`'s flags, and the checks that need no file.

use std::path::PathBuf;

use rullama_finetune::lora::{LoraSpec, Target};
use rullama_finetune::optim::Schedule;

use super::super::CliError;
use super::super::generation::BackendChoice;
use super::usage;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// A GGUF path, an Ollama name or a cached test model: the frozen base.
    pub model: String,
    /// Training data: JSONL, one `{"text"}`, `{"prompt","completion"}` or `{"messages"}`
    /// object a line (docs/FINETUNE.md).
    #[arg(long, required_unless_present = "bench")]
    pub data: Option<PathBuf>,
    /// The adapter to write (llama.cpp's LoRA GGUF); its checkpoint (OUT.ckpt.safetensors),
    /// log (OUT.log.jsonl) and loss curve (OUT.loss.png) go beside it.
    #[arg(long, required_unless_present = "bench")]
    pub out: Option<PathBuf>,
    /// Also write the adapter as a PEFT directory (adapter_model.safetensors +
    /// adapter_config.json) that `PeftModel.from_pretrained` loads onto the Hugging Face
    /// model of the same weights.
    #[arg(long, value_name = "DIR")]
    pub peft: Option<PathBuf>,
    /// LoRA rank.
    #[arg(long, default_value_t = 16)]
    pub rank: usize,
    /// LoRA alpha: the update is scaled by alpha / rank.
    #[arg(long, default_value_t = 32.0)]
    pub alpha: f32,
    /// Scale by alpha / sqrt(rank) instead (rsLoRA).
    #[arg(long)]
    pub rslora: bool,
    /// LoRA dropout: each input of the adapter zeroed with this probability in a training
    /// step (PEFT's lora_dropout), in [0, 1).
    #[arg(long, default_value_t = 0.0)]
    pub dropout: f32,
    /// Projections to adapt, comma-separated: q,k,v,o,gate,up,down (PEFT's q_proj … and
    /// llama.cpp's attn_q … names work too).
    #[arg(long, default_value = "q,k,v,o,gate,up,down", value_delimiter = ',')]
    pub targets: Vec<String>,
    /// Peak learning rate.
    #[arg(long, default_value_t = 2e-4)]
    pub lr: f64,
    /// Learning-rate schedule after the warm-up: constant, linear or cosine.
    #[arg(long, default_value = "linear")]
    pub schedule: String,
    /// Steps of linear warm-up from 0.
    #[arg(long, default_value_t = 0)]
    pub warmup: u64,
    /// Passes over the data (ignored with --steps).
    #[arg(long, default_value_t = 1)]
    pub epochs: u64,
    /// Optimizer steps in all (instead of --epochs).
    #[arg(long)]
    pub steps: Option<u64>,
    /// Sequences a batch (rows; packed rows with --pack).
    #[arg(long, default_value_t = 1)]
    pub batch: usize,
    /// Batches accumulated into one optimizer step.
    #[arg(long, default_value_t = 1)]
    pub grad_accum: usize,
    /// Longest sequence, in tokens: longer examples are cut (and reported).
    #[arg(long, default_value_t = 512)]
    pub ctx: usize,
    /// Pack several examples into rows of --ctx tokens instead of one a row.
    #[arg(long)]
    pub pack: bool,
    /// Decoupled weight decay.
    #[arg(long, default_value_t = 0.0)]
    pub weight_decay: f64,
    /// Clip the gradients' global norm to this (0: no clipping).
    #[arg(long, default_value_t = 1.0)]
    pub max_grad_norm: f64,
    /// Seed of the adapter's initial values and the data's order.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Evaluation data (JSONL, same formats).
    #[arg(long, conflicts_with = "eval_split")]
    pub eval: Option<PathBuf>,
    /// Hold out this fraction of --data for evaluation (chosen by --seed).
    #[arg(long)]
    pub eval_split: Option<f64>,
    /// Evaluate every N steps (and at the end) when there is eval data.
    #[arg(long, default_value_t = 50)]
    pub eval_every: u64,
    /// Save a checkpoint and the adapter every N steps (0: only at the end and on Ctrl-C).
    #[arg(long, default_value_t = 0)]
    pub save_every: u64,
    /// Stop after N steps of this invocation, saving as at the end; --resume goes on (the
    /// schedule still spans all the steps).
    #[arg(long)]
    pub stop_after: Option<u64>,
    /// Continue from OUT.ckpt.safetensors, as if the run had never stopped.
    #[arg(long)]
    pub resume: bool,
    /// Print one JSON object at the end (steps, losses, tokens/s, files) instead of text.
    #[arg(long)]
    pub json: bool,
    /// Where the steps run: auto (the GPU when a hardware adapter exists, else the CPU), gpu,
    /// or cpu (the f64 training tape: the reference, slow).
    #[arg(long, value_enum, default_value_t = BackendChoice::Auto)]
    pub backend: BackendChoice,
    /// On the GPU, keep the products through the frozen weights and the attention in f32
    /// instead of the tensor cores (f16 inputs, f32 sums).
    #[arg(long)]
    pub no_tensor_cores: bool,
    /// Measure instead of training: --steps steps (10 unless given) of --batch random
    /// sequences of --ctx tokens, the first one (which builds the step) untimed; prints
    /// tokens/s and the device memory, and writes nothing. --data and --out are not needed.
    #[arg(long)]
    pub bench: bool,
    /// With --bench on the GPU: replay the last step with a timestamp around every dispatch
    /// and print the time per kernel.
    #[arg(long, requires = "bench")]
    pub profile: bool,
}

/// The adapter's shape from the flags.
pub fn spec(args: &Args) -> Result<LoraSpec, CliError> {
    let targets = args
        .targets
        .iter()
        .filter(|t| !t.trim().is_empty())
        .map(|t| Target::from_name(t))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(LoraSpec {
        rank: args.rank,
        alpha: args.alpha,
        targets,
        rslora: args.rslora,
        dropout: args.dropout,
    })
}

/// Checks the flags that need no file.
pub fn check_flags(args: &Args) -> Result<Schedule, CliError> {
    if args.batch == 0 || args.grad_accum == 0 {
        return Err(usage("--batch and --grad-accum take at least 1"));
    }
    if args.steps == Some(0) || (args.steps.is_none() && args.epochs == 0) {
        return Err(usage("nothing to do: --steps and --epochs take at least 1"));
    }
    if !(args.lr.is_finite() && args.lr > 0.0) {
        return Err(usage(format!("--lr {} is not a positive number", args.lr)));
    }
    let non_negative = |v: f64| v.is_finite() && v >= 0.0;
    if !(non_negative(args.weight_decay) && non_negative(args.max_grad_norm)) {
        return Err(usage(
            "--weight-decay and --max-grad-norm take a number of at least 0",
        ));
    }
    if let Some(f) = args.eval_split
        && !(f > 0.0 && f < 1.0)
    {
        return Err(usage(format!("--eval-split {f} must lie between 0 and 1")));
    }
    Schedule::from_name(&args.schedule).ok_or_else(|| {
        usage(format!(
            "--schedule {}: expected constant, linear or cosine",
            args.schedule
        ))
    })
}
