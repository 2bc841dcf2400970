//! `rullama perplexity MODEL --file F`: llama-perplexity's method, so figures compare.
//!
//! The text is tokenized whole (with BOS where the model adds it) and scored in chunks of
//! `--ctx` tokens by `rullama_model::perplexity` (the method is described there; `cargo xtask
//! parity --models` runs the same code against the oracle).

use std::io::Write;
use std::path::PathBuf;

use rullama_model::perplexity::{self, Chunks, Perplexity};
use rullama_model::{Backend, Model};
use rullama_tokenizer::{EncodeOptions, Tokenizer};

use super::generation::{self, GenerationArgs, ModelTask};
use super::{CliError, validate};

// The flags shared with `run` (`GenerationArgs`) bring sampling and output flags that scoring
// accepts and ignores: hidden from this command's help, and `--ctx` described as what it is
// here, the chunk length.
#[derive(clap::Args)]
#[command(
    mut_arg("n_predict", |a| a.hide(true)),
    mut_arg("temp", |a| a.hide(true)),
    mut_arg("top_k", |a| a.hide(true)),
    mut_arg("top_p", |a| a.hide(true)),
    mut_arg("min_p", |a| a.hide(true)),
    mut_arg("repeat_penalty", |a| a.hide(true)),
    mut_arg("repeat_last_n", |a| a.hide(true)),
    mut_arg("seed", |a| a.hide(true)),
    mut_arg("verbose", |a| a.hide(true)),
    mut_arg("ctx", |a| a.help(
        "Tokens a chunk (default 4096); the second half of each chunk is scored"
    )),
)]
pub struct Args {
    /// A GGUF path, an Ollama name (`gemma3:270m`) or a cached test model (`gemma3-270m`).
    model: String,
    /// The text to score.
    #[arg(short, long)]
    file: PathBuf,
    /// Stop after this many chunks, at least 1 (default: all whole chunks of the text).
    #[arg(long)]
    chunks: Option<usize>,
    /// Print `{"ppl": .., "stderr": .., "chunks": .., "tokens_scored": ..}`.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    generation: GenerationArgs,
}

/// The shortest chunk scored: its first half (the history of every scored token) at least
/// 8 tokens. Shorter chunks run, but their figure measures guessing from a few words, not
/// the model (llama.cpp pads any context to 256).
pub const MIN_CTX: usize = 16;

pub fn run(args: &Args) -> Result<(), CliError> {
    let ctx = args.generation.ctx_or_default();
    if ctx < MIN_CTX {
        return Err(CliError::Usage(format!(
            "--ctx {ctx} is too short for perplexity: a chunk takes at least {MIN_CTX} tokens \
             (the first half is the history of the second, which is scored)"
        )));
    }
    if args.chunks == Some(0) {
        return Err(CliError::Usage("--chunks must be at least 1".into()));
    }
    let text = std::fs::read_to_string(&args.file)
        .map_err(|e| CliError::Usage(format!("reading {}: {e}", args.file.display())))?;
    let mut loaded = generation::load(&args.model, &args.generation)?;
    let tokens = loaded.tokenizer.encode(
        &text,
        EncodeOptions {
            add_special: true,
            parse_special: false,
        },
    );
    let available = Chunks::available(&tokens, ctx);
    let n_chunks = args.chunks.map_or(available, |c| c.min(available));
    if n_chunks == 0 {
        return Err(CliError::Usage(format!(
            "{} has {} tokens, fewer than one chunk of --ctx {ctx}",
            args.file.display(),
            tokens.len()
        )));
    }
    validate::warn_beyond_training(loaded.config(), ctx);
    let bos = loaded
        .tokenizer
        .add_bos()
        .then(|| loaded.tokenizer.bos())
        .flatten();
    let total = loaded.run(Score(Chunks {
        tokens: &tokens,
        ctx,
        n_chunks,
        bos,
    }))?;
    let mut out = std::io::stdout().lock();
    if args.json {
        let report = serde_json::json!({
            "ppl": total.ppl(), "stderr": total.stderr(), "chunks": n_chunks,
            "ctx": ctx, "tokens_scored": total.count(),
        });
        writeln!(out, "{report}")?;
    } else {
        writeln!(
            out,
            "Final estimate: PPL = {:.4} +/- {:.5}",
            total.ppl(),
            total.stderr()
        )?;
    }
    Ok(())
}

/// Score the chunks, printing the running PPL to stderr as llama-perplexity does.
struct Score<'a>(Chunks<'a>);

impl ModelTask for Score<'_> {
    type Output = Perplexity;

    fn run<B: Backend>(self, model: &Model<B>, _: &Tokenizer) -> Result<Perplexity, CliError> {
        let mut err = std::io::stderr();
        let total = perplexity::score(model, self.0, |i, total| {
            // Progress only: a closed stderr must not fail the figure on stdout.
            let _ = write!(err, "[{}]{:.4},", i + 1, total.ppl());
            let _ = err.flush();
        })?;
        writeln!(err)?;
        Ok(total)
    }
}
