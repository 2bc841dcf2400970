//! What `run` and `chat` share: loading a model with its tokenizer, the sampling flags, and
//! streaming generated text to stdout while statistics go to stderr.

use std::io::Write;
use std::num::NonZeroUsize;
use std::time::{Duration, Instant};

use rullama_gguf::store;
use rullama_kernels::Gpu;
use rullama_model::cpu::WeightStorage;
use rullama_model::gpu::{GpuBackend, GpuOptions, KvDtype};
use rullama_model::sampler::{PenaltyParams, RANDOM_SEED, Sampler, SamplerParams};
use rullama_model::validate::{MAX_CTX, check_context};
use rullama_model::{
    Backend, CpuBackend, Generator, Model, ModelConfig, OutputRows, Session, StopReason,
};
use rullama_tokenizer::{StreamDecoder, Tokenizer};

use super::lora::{self, LoraArg};
use super::{CliError, validate};

/// Sampling and context flags, with llama.cpp's defaults.
///
/// Where sampling runs: without a repeat penalty (`--repeat-penalty 1` or
/// `--repeat-last-n 0`) the GPU executor samples on the GPU and reads back only the token id
/// when the settings are greedy (`--temp 0`) or `--top-k` is 1..=64
/// (`rullama_kernels::ops::sample::K_MAX`) with any `--top-p`, `--min-p` and `--temp`; other
/// settings (`--top-k 0` or above 64, a repeat penalty) read the logits back and sample on
/// the CPU, as the CPU executor always does. The same `--seed` gives the same draws either
/// way. The flags' help says the same (a test below holds `--top-k`'s bound to `K_MAX`).
#[derive(clap::Args, Debug)]
pub struct GenerationArgs {
    /// Tokens to generate at most (generation also stops at the model's end-of-turn tokens).
    #[arg(short = 'n', long = "n-predict", default_value_t = 256)]
    pub n_predict: usize,
    /// Temperature, >= 0; 0 is greedy (always the most likely token).
    #[arg(long, default_value_t = 0.8, allow_negative_numbers = true)]
    pub temp: f32,
    /// Keep only the k most likely tokens (0 = all). The GPU executor samples on the GPU for
    /// 1..=64 and at --temp 0 (without a repeat penalty), on the CPU otherwise.
    #[arg(long, default_value_t = 40, allow_negative_numbers = true,
          value_parser = clap::value_parser!(i32).range(0..))]
    pub top_k: i32,
    /// Keep the most likely tokens up to this cumulative probability, 0 to 1 (1 = off).
    #[arg(long, default_value_t = 0.95, allow_negative_numbers = true)]
    pub top_p: f32,
    /// Drop tokens less likely than this fraction of the most likely one, 0 to 1 (0 = off).
    #[arg(long, default_value_t = 0.05, allow_negative_numbers = true)]
    pub min_p: f32,
    /// Penalise tokens seen in the last `--repeat-last-n` tokens, > 0 (1 = off). Other than
    /// 1, the GPU executor reads the logits back and samples on the CPU.
    #[arg(long, default_value_t = 1.0, allow_negative_numbers = true)]
    pub repeat_penalty: f32,
    /// How many of the last tokens `--repeat-penalty` looks at (0 = off; any longer than the
    /// context means the whole context).
    #[arg(long, default_value_t = 64)]
    pub repeat_last_n: usize,
    /// Seed of the random draw; the same seed gives the same text. Random when left out.
    #[arg(long)]
    pub seed: Option<u32>,
    /// Context length in tokens (prompt plus generated text), 1 to 4294967295. Default: the
    /// model's training context up to 4096 (llama.cpp's default); run and chat halve it
    /// while the GPU cannot allocate its KV cache. A context given here is used as is (with
    /// a warning past the training context), or is an error saying what would fit.
    #[arg(long, value_parser = ctx_parser())]
    pub ctx: Option<usize>,
    /// Which executor runs the model.
    #[arg(long, value_enum, default_value_t = BackendChoice::Auto)]
    pub backend: BackendChoice,
    /// CPU threads for the reference executor, at least 1 (default: all cores; more than
    /// the cores is slower, with a warning).
    #[arg(long, value_parser = threads_parser())]
    pub threads: Option<usize>,
    /// The most tokens one step feeds (llama.cpp's physical batch, `-ub`): a longer prompt
    /// runs as steps of this many over the same cache, which bounds its activations' memory
    /// (default 4096; fewer where the GPU's largest buffer binding needs).
    #[arg(long)]
    pub ubatch: Option<NonZeroUsize>,
    /// A LoRA adapter to apply: a llama.cpp LoRA GGUF or a PEFT directory, at scale 1 or
    /// the one after `:` (`--lora a.gguf:0.5`, llama.cpp's `--lora-scaled`); repeat for
    /// several.
    #[arg(long = "lora", value_name = "FILE[:SCALE]")]
    pub lora: Vec<LoraArg>,
    #[command(flatten)]
    pub gpu: GpuFlags,
    /// Print load time, prompt and generation speed to stderr, like `ollama run --verbose`.
    #[arg(long)]
    pub verbose: bool,
}

/// `--ctx`'s parser: 1 to [`MAX_CTX`] positions (a context's positions are `u32`).
pub fn ctx_parser() -> clap::builder::RangedU64ValueParser<usize> {
    clap::builder::RangedU64ValueParser::new().range(1..=MAX_CTX as u64)
}

/// `--threads`'s parser: at least one.
pub fn threads_parser() -> clap::builder::RangedU64ValueParser<usize> {
    clap::builder::RangedU64ValueParser::new().range(1..)
}

/// The context `--ctx` gives by default, where the model was trained with at least as many.
pub const DEFAULT_CTX: usize = 4096;
/// The smallest context the default halves to before it gives up.
const MIN_AUTO_CTX: usize = 256;

/// A session with `ctx` positions, or by default ([`GenerationArgs::ctx`]) the model's
/// training context up to [`DEFAULT_CTX`], halved (to [`MIN_AUTO_CTX`] at the least) while
/// the device runs out of memory allocating its KV cache; a shrunken context is said on
/// stderr.
pub fn open_session<B: Backend>(
    model: &Model<B>,
    ctx: Option<usize>,
) -> Result<Session<'_, B>, CliError> {
    if let Some(n) = ctx {
        return match model.session(n) {
            Ok(session) => {
                validate::warn_beyond_training(model.config(), n);
                Ok(session)
            }
            Err(e) if e.is_out_of_memory() => Err(CliError::Usage(format!(
                "{e}; {}",
                fitting_context(model, n)
            ))),
            Err(e) => Err(e.into()),
        };
    }
    let wanted = model.config().n_ctx_train.clamp(1, DEFAULT_CTX);
    let mut n = wanted;
    // Each failed try drops its cache before the next; the last error is the one returned.
    loop {
        match model.session(n) {
            Ok(session) => {
                if n < wanted {
                    eprintln!(
                        "note: a context of {wanted} tokens does not fit the GPU's memory; \
                         using {n} (--ctx sets it)"
                    );
                }
                return Ok(session);
            }
            Err(e) if e.is_out_of_memory() && n / 2 >= MIN_AUTO_CTX => n /= 2,
            Err(e) => return Err(e.into()),
        }
    }
}

/// What an explicit context that the device ran out of memory for could be instead: the
/// largest of `n / 2`, `n / 4`, .. (down to [`MIN_AUTO_CTX`]) whose KV cache the device
/// allocates, tried as the default context is.
fn fitting_context<B: Backend>(model: &Model<B>, n: usize) -> String {
    let mut m = n / 2;
    while m >= MIN_AUTO_CTX {
        match model.session(m) {
            Ok(_) => return format!("--ctx {m} fits"),
            Err(e) if e.is_out_of_memory() => m /= 2,
            Err(_) => break,
        }
    }
    format!("not even --ctx {MIN_AUTO_CTX} fits beside the weights")
}

impl GenerationArgs {
    /// `--ctx`, or [`DEFAULT_CTX`] where a fixed length is needed before a model is loaded
    /// (perplexity's chunks).
    pub fn ctx_or_default(&self) -> usize {
        self.ctx.unwrap_or(DEFAULT_CTX)
    }

    /// The sampler the flags describe (values unchecked: see [`GenerationArgs::validate`]).
    pub fn sampler_params(&self) -> SamplerParams {
        SamplerParams {
            seed: self.seed.unwrap_or(RANDOM_SEED),
            temperature: self.temp,
            top_k: self.top_k,
            top_p: self.top_p,
            min_p: self.min_p,
            penalties: PenaltyParams {
                last_n: self.repeat_last_n,
                repeat: self.repeat_penalty,
                ..PenaltyParams::default()
            },
            ..SamplerParams::default()
        }
    }

    pub fn sampler(&self) -> Sampler {
        Sampler::new(self.sampler_params())
    }

    /// The flags' values against their ranges (`rullama_model::validate`, the check every
    /// front end shares), before anything is loaded: the first out of range is the error,
    /// named as its flag. `--threads` beyond the cores warns.
    pub fn validate(&self) -> Result<(), CliError> {
        self.sampler_params().validate()?;
        if let Some(ctx) = self.ctx {
            check_context(ctx)?;
        }
        if let Some(threads) = self.threads {
            validate::warn_threads(threads);
        }
        Ok(())
    }
}

/// The GPU executor's arithmetic, shared by run, chat, perplexity and bench.
#[derive(clap::Args, Debug, Clone, Copy)]
pub struct GpuFlags {
    /// Element type of the GPU executor's KV cache: f16 halves its memory and the attention's
    /// reads (llama.cpp's default); f32 (with --no-tensor-cores) keeps the exact arithmetic of
    /// the CPU reference.
    #[arg(long, value_enum, default_value_t = CacheType::F16)]
    pub cache_type: CacheType,
    /// Multiply prompt blocks with f32 FMAs instead of the tensor cores. Where the GPU has
    /// them (cooperative matrices: NVIDIA), prompt matmuls round weights and activations to
    /// f16 and sum in f32, as llama.cpp's Vulkan backend does; this keeps f32 throughout.
    #[arg(long)]
    pub no_tensor_cores: bool,
    /// Write each decode matvec's input as two int8 digits of a scale per block of 32
    /// (about 16 bits: within amax/64516 of the input) and multiply with packed integer dot
    /// products, for the weight formats that have such a kernel (Q4_0, Q4_1, Q5_0, Q5_1,
    /// Q8_0, Q4_K, Q5_K, Q6_K). Meant for GPUs with packed int8 dot products; off by default
    /// because on the H100 it made the large products faster but no decode step
    /// (docs/PERF.md, D-q8-inputs-off).
    #[arg(long)]
    pub q8_inputs: bool,
    /// Decode steps the GPU executor records into one submission (one compute pass), 1 to 8.
    /// Each submission costs the GPU a gap between steps; 4 (the default) shares it among
    /// four tokens, which then come back together (a generation's first submissions hold 1,
    /// 1 and 2 steps, so the first tokens do not wait). 1 submits each step on its own.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..=8))]
    pub steps_per_submit: u16,
}

impl GpuFlags {
    pub fn options(self) -> GpuOptions {
        GpuOptions {
            kv_dtype: self.cache_type.dtype(),
            tensor_cores: !self.no_tensor_cores,
            q8_inputs: self.q8_inputs,
            steps_per_submit: usize::from(self.steps_per_submit),
            ..GpuOptions::default()
        }
    }
}

/// The GPU executor's KV cache element type (`--cache-type`).
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum CacheType {
    F16,
    F32,
}

impl CacheType {
    fn dtype(self) -> KvDtype {
        match self {
            CacheType::F16 => KvDtype::F16,
            CacheType::F32 => KvDtype::F32,
        }
    }
}

/// Which executor runs the model.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackendChoice {
    /// The GPU when a hardware adapter exists, else the CPU reference executor (a software
    /// Vulkan device such as lavapipe runs the kernels slower than the CPU executor does).
    Auto,
    /// The GPU executor on the adapter RULLAMA_ADAPTER picks (a software one included).
    Gpu,
    /// The CPU reference executor: exact f32 arithmetic on the dequantized weights.
    Cpu,
}

impl BackendChoice {
    /// The GPU this choice runs on, or `None` for the CPU. No adapter at all is fine for
    /// `Auto`: the CPU executor runs everywhere.
    pub fn gpu(self) -> Result<Option<Gpu>, CliError> {
        Ok(match self {
            BackendChoice::Cpu => None,
            BackendChoice::Gpu => Some(Gpu::open()?),
            BackendChoice::Auto => Gpu::open().ok().filter(|gpu| !gpu.is_software()),
        })
    }
}

/// The model on the executor that was chosen.
pub enum Engine {
    Cpu(Box<Model<CpuBackend>>),
    Gpu(Box<Model<GpuBackend>>),
}

/// Work that runs on a model whatever its executor: `Loaded::run` calls it with the right one.
pub trait ModelTask {
    type Output;
    fn run<B: Backend>(
        self,
        model: &Model<B>,
        tokenizer: &Tokenizer,
    ) -> Result<Self::Output, CliError>;
}

/// A model ready to generate: its tokenizer and weights.
pub struct Loaded {
    pub tokenizer: Tokenizer,
    pub engine: Engine,
    /// The executor, for `--verbose` (`cpu` or the adapter's name).
    pub executor: String,
    pub load_time: Duration,
}

impl Loaded {
    /// The model's config, whichever executor holds it.
    pub fn config(&self) -> &ModelConfig {
        match &self.engine {
            Engine::Cpu(model) => model.config(),
            Engine::Gpu(model) => model.config(),
        }
    }

    pub fn run<T: ModelTask>(&mut self, task: T) -> Result<T::Output, CliError> {
        match &mut self.engine {
            Engine::Cpu(model) => task.run(model, &self.tokenizer),
            Engine::Gpu(model) => task.run(model, &self.tokenizer),
        }
    }
}

/// Checks the flags ([`GenerationArgs::validate`]), then loads `model` as they say.
pub fn load(model: &str, args: &GenerationArgs) -> Result<Loaded, CliError> {
    args.validate()?;
    let tuning = Tuning {
        ubatch: args.ubatch,
        lora: &args.lora,
    };
    load_on(model, args.backend, args.threads, args.gpu, tuning)
}

/// What a command sets on a model once it is loaded, whichever executor holds it.
#[derive(Debug, Clone, Copy, Default)]
pub struct Tuning<'a> {
    /// The most tokens a step of its sessions feeds.
    pub ubatch: Option<NonZeroUsize>,
    /// The LoRA adapters to apply.
    pub lora: &'a [LoraArg],
}

/// Loads `model` on the executor `backend` names (`threads`: the CPU executor's; `gpu`: the
/// GPU executor's arithmetic), then applies `tuning`, with an Ollama model's adapter layers
/// before the adapters `tuning` names.
pub fn load_on(
    model: &str,
    backend: BackendChoice,
    threads: Option<usize>,
    gpu_flags: GpuFlags,
    tuning: Tuning<'_>,
) -> Result<Loaded, CliError> {
    let start = Instant::now();
    let resolved = store::resolve(model)?;
    let path = resolved.path;
    // An Ollama model's adapter layers first (Ollama applies them at scale 1), then --lora.
    let loras = lora::with_layers(resolved.adapters, tuning.lora);
    let tuning = Tuning {
        lora: &loras,
        ..tuning
    };
    let tokenizer = Tokenizer::open(&path)?;
    let gpu = backend.gpu()?;
    let (engine, executor) = match gpu {
        Some(gpu) => {
            let name = gpu.info.name.clone();
            (
                Engine::Gpu(Box::new(tuned(
                    Model::open(
                        &path,
                        GpuBackend::new(gpu).with_options(gpu_flags.options()),
                    )?,
                    tuning,
                )?)),
                name,
            )
        }
        None => {
            let backend = match threads {
                Some(n) => CpuBackend::with_threads(n),
                None => CpuBackend::new(),
            };
            // Dequantized once at load (bit-exact, 4 bytes a weight): ~3x faster decode than
            // dequantizing every row on every token.
            let backend = backend.with_storage(WeightStorage::Dense);
            (
                Engine::Cpu(Box::new(tuned(Model::open(&path, backend)?, tuning)?)),
                "cpu (reference executor)".to_string(),
            )
        }
    };
    Ok(Loaded {
        tokenizer,
        engine,
        executor,
        load_time: start.elapsed(),
    })
}

/// `model` with its sessions' ubatch set where `tuning` gives one, and its LoRA adapters
/// applied.
fn tuned<B: Backend>(mut model: Model<B>, tuning: Tuning<'_>) -> Result<Model<B>, CliError> {
    if let Some(u) = tuning.ubatch {
        model.set_ubatch(u);
    }
    lora::apply(&mut model, tuning.lora)?;
    Ok(model)
}

/// Timings of one generation, for `--verbose`, and why it stopped.
#[derive(Debug, Default)]
pub struct Stats {
    pub prompt_tokens: usize,
    /// The prompt's step and the first token's draw.
    pub prompt_time: Duration,
    /// Tokens written out (an end-of-generation token is not).
    pub generated: usize,
    /// Tokens drawn after the first, one decode step each (the end-of-generation token
    /// included): what `generation_time` measured.
    pub decode_steps: usize,
    pub generation_time: Duration,
    /// Why generation stopped (`-n 0` stops at its length before drawing); `None` only
    /// before [`generate`] has returned.
    pub stop: Option<StopReason>,
}

impl Stats {
    pub fn print(&self, loaded: Option<(&str, Duration)>) {
        let rate = |n: usize, t: Duration| n as f64 / t.as_secs_f64().max(1e-9);
        if let Some((executor, load)) = loaded {
            eprintln!("executor:             {executor}");
            eprintln!("load duration:        {:.2?}", load);
        }
        eprintln!("prompt eval count:    {} token(s)", self.prompt_tokens);
        eprintln!("prompt eval duration: {:.2?}", self.prompt_time);
        eprintln!(
            "prompt eval rate:     {:.2} tokens/s",
            rate(self.prompt_tokens, self.prompt_time)
        );
        eprintln!("eval count:           {} token(s)", self.generated);
        eprintln!("eval duration:        {:.2?}", self.generation_time);
        // The first token comes with the prompt's step (counted in its time), so the rate
        // is over the decode steps after it; with none there is no rate to give.
        if self.decode_steps == 0 {
            eprintln!("eval rate:            n/a (the first token comes with the prompt)");
        } else {
            eprintln!(
                "eval rate:            {:.2} tokens/s",
                rate(self.decode_steps, self.generation_time)
            );
        }
        if let Some(stop) = self.stop {
            eprintln!("done reason:          {}", stop.as_str());
        }
    }

    /// Says on stderr when generation stopped because the context was full: a silent cut
    /// would look like the model's own end.
    pub fn note_context_full(&self, n_ctx: usize) {
        if self.stop == Some(StopReason::Context) {
            eprintln!(
                "note: generation stopped: the context of {n_ctx} tokens is full (--ctx sets it)"
            );
        }
    }
}

/// Where the prompt goes and how much to generate.
#[derive(Debug, Clone, Copy)]
pub struct Turn<'a> {
    /// Tokens to feed, starting at cache position `start_pos` (at most the cache's length:
    /// anything the cache holds past it is dropped, which is how a chat rewinds).
    pub prompt: &'a [u32],
    pub start_pos: usize,
    pub n_predict: usize,
}

/// Feed the turn's prompt, then sample up to `n_predict` tokens, streaming their text to `out`
/// as it becomes valid UTF-8. Stops at an end-of-generation token (not printed, not fed) or
/// when the context is full. Returns the generated ids, timings and why it stopped
/// ([`Stats::stop`]).
pub fn generate<B: Backend>(
    session: &mut Session<'_, B>,
    tokenizer: &Tokenizer,
    turn: Turn<'_>,
    sampler: &mut Sampler,
    out: &mut impl Write,
) -> Result<(Vec<u32>, Stats), CliError> {
    generate_until(session, tokenizer, turn, sampler, out, &|| false)
}

/// [`generate`], also stopping before the next token once `interrupted` returns true (chat's
/// Ctrl-C): the tokens returned so far are kept, as at any other stop, and no
/// [`Stats::stop`] reason is given unless the generator had one.
pub fn generate_until<B: Backend>(
    session: &mut Session<'_, B>,
    tokenizer: &Tokenizer,
    turn: Turn<'_>,
    sampler: &mut Sampler,
    out: &mut impl Write,
    interrupted: &dyn Fn() -> bool,
) -> Result<(Vec<u32>, Stats), CliError> {
    let Turn {
        prompt,
        start_pos,
        n_predict,
    } = turn;
    let mut stats = Stats {
        prompt_tokens: prompt.len(),
        ..Stats::default()
    };
    // Each step draws the next token on the GPU where the executor and the sampler's
    // settings allow (only the id comes back; the step after it is queued before it is
    // read), else from logits read back.
    let start = Instant::now();
    if n_predict == 0 {
        session.forward(prompt, start_pos, OutputRows::Last)?;
        stats.prompt_time = start.elapsed();
        stats.stop = Some(StopReason::Length);
        return Ok((Vec::new(), stats));
    }
    let mut tokens = Generator::start(session, prompt, start_pos, n_predict, sampler)?;
    let first = tokens.next(sampler)?;
    stats.prompt_time = start.elapsed();

    let start = Instant::now();
    let mut decoder = StreamDecoder::new(tokenizer, false);
    let mut generated = Vec::new();
    let mut next = first;
    let mut drawn = 0usize;
    let mut stop = None;
    while let Some(token) = next {
        drawn += 1;
        if tokenizer.is_eog(token) {
            stop = Some(StopReason::EndOfGeneration);
            break;
        }
        generated.push(token);
        out.write_all(decoder.push(token)?.as_bytes())?;
        out.flush()?;
        if interrupted() {
            break;
        }
        next = tokens.next(sampler)?;
    }
    stats.stop = stop.or(tokens.stop_reason());
    tokens.finish();
    // A generation cut by -n or the context may end inside a character: its bytes are held
    // (never printed as U+FFFD); after the model's own end they are what it wrote.
    if stats.stop == Some(StopReason::EndOfGeneration) {
        out.write_all(decoder.finish().as_bytes())?;
    }
    out.flush()?;
    stats.generated = generated.len();
    stats.decode_steps = drawn.saturating_sub(1);
    stats.generation_time = start.elapsed();
    Ok((generated, stats))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `--top-k`'s help names the largest k the GPU samples, which is the kernel's `K_MAX`.
    #[test]
    fn top_k_help_names_the_gpu_samplers_bound() {
        use clap::CommandFactory;
        #[derive(clap::Parser)]
        struct Flags {
            #[command(flatten)]
            generation: GenerationArgs,
        }
        let command = Flags::command();
        let help = command
            .get_arguments()
            .find(|a| a.get_id() == "top_k")
            .and_then(|a| a.get_help())
            .expect("--top-k has a help text")
            .to_string();
        let k_max = rullama_kernels::ops::sample::K_MAX;
        assert!(help.contains(&format!("1..={k_max} ")), "{help}");
    }

    /// Without `--ctx` the session holds the model's training context up to DEFAULT_CTX
    /// (SmolLM2-135M was trained with 8192); a given `--ctx` is used as is.
    #[test]
    fn default_context_is_the_training_context_up_to_4096() {
        let path = store::cached_test_model("smollm2-135m")
            .expect("test model smollm2-135m is not cached: run `cargo xtask models`");
        let model = Model::open(path, CpuBackend::new()).unwrap();
        assert!(model.config().n_ctx_train > DEFAULT_CTX);
        assert_eq!(open_session(&model, None).unwrap().n_ctx(), DEFAULT_CTX);
        assert_eq!(open_session(&model, Some(100)).unwrap().n_ctx(), 100);
        assert!(open_session(&model, Some(0)).is_err());
    }
}
