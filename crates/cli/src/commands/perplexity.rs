//! `rullama perplexity MODEL --file F`: llama-perplexity's method, so figures compare.
//!
//! The text is tokenized whole (with BOS where the model adds it) and cut into chunks of
//! `--ctx` tokens; each chunk runs from an empty cache with its first token replaced by BOS
//! (where the model adds BOS), and only the second half is scored: the logits at positions
//! `ctx/2 ..= ctx-2` predict tokens `ctx/2+1 ..= ctx-1`, so every scored token has at least
//! half a context of history. PPL = exp(mean NLL); its error is the standard error of the
//! mean NLL carried through exp, as llama.cpp prints it.

use std::io::Write;
use std::path::PathBuf;

use rullama_model::{Backend, Model, OutputRows, Session, logits};
use rullama_tokenizer::{EncodeOptions, Tokenizer};

use super::CliError;
use super::generation::{self, GenerationArgs, ModelTask};

#[derive(clap::Args)]
pub struct Args {
    /// A GGUF path, an Ollama name (`gemma3:270m`) or a cached test model (`gemma3-270m`).
    model: String,
    /// The text to score.
    #[arg(short, long)]
    file: PathBuf,
    /// Stop after this many chunks (default: all whole chunks of the text).
    #[arg(long)]
    chunks: Option<usize>,
    /// Print `{"ppl": .., "stderr": .., "chunks": .., "tokens_scored": ..}`.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    generation: GenerationArgs,
}

/// The running sums llama.cpp keeps.
#[derive(Debug, Default, Clone, Copy)]
pub struct Perplexity {
    nll: f64,
    nll2: f64,
    count: usize,
}

impl Perplexity {
    fn add(&mut self, nll: f64) {
        self.nll += nll;
        self.nll2 += nll * nll;
        self.count += 1;
    }

    pub fn ppl(&self) -> f64 {
        (self.nll / self.count as f64).exp()
    }

    /// `ppl * sqrt(var(nll) / (n - 1))`, llama-perplexity's "+/-".
    pub fn stderr(&self) -> f64 {
        let n = self.count as f64;
        let mean = self.nll / n;
        let var = self.nll2 / n - mean * mean;
        if var > 0.0 && self.count > 1 {
            (var / (n - 1.0)).sqrt() * self.ppl()
        } else {
            0.0
        }
    }
}

pub fn run(args: &Args) -> Result<(), CliError> {
    let text = std::fs::read_to_string(&args.file)
        .map_err(|e| CliError::Usage(format!("reading {}: {e}", args.file.display())))?;
    let mut loaded = generation::load(&args.model, &args.generation)?;
    let ctx = args.generation.ctx;
    if ctx < 4 {
        return Err(CliError::Usage(format!(
            "--ctx {ctx} is too small to score half a chunk"
        )));
    }
    let tokens = loaded.tokenizer.encode(
        &text,
        EncodeOptions {
            add_special: true,
            parse_special: false,
        },
    );
    let available = tokens.len() / ctx;
    let n_chunks = args.chunks.map_or(available, |c| c.min(available));
    if n_chunks == 0 {
        return Err(CliError::Usage(format!(
            "{} has {} tokens, fewer than one chunk of --ctx {ctx}",
            args.file.display(),
            tokens.len()
        )));
    }
    let bos = loaded
        .tokenizer
        .add_bos()
        .then(|| loaded.tokenizer.bos())
        .flatten();
    let total = loaded.run(Score {
        tokens: &tokens,
        ctx,
        n_chunks,
        bos,
    })?;
    let mut out = std::io::stdout().lock();
    if args.json {
        let report = serde_json::json!({
            "ppl": total.ppl(), "stderr": total.stderr(), "chunks": n_chunks,
            "ctx": ctx, "tokens_scored": total.count,
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

/// Score `n_chunks` chunks of `ctx` tokens, printing the running PPL to stderr as
/// llama-perplexity does.
struct Score<'a> {
    tokens: &'a [u32],
    ctx: usize,
    n_chunks: usize,
    bos: Option<u32>,
}

impl ModelTask for Score<'_> {
    type Output = Perplexity;

    fn run<B: Backend>(self, model: &mut Model<B>, _: &Tokenizer) -> Result<Perplexity, CliError> {
        let mut session = model.session(self.ctx)?;
        let mut total = Perplexity::default();
        let mut err = std::io::stderr();
        for (i, chunk) in self
            .tokens
            .chunks_exact(self.ctx)
            .take(self.n_chunks)
            .enumerate()
        {
            score_chunk(&mut session, chunk, self.bos, &mut total)?;
            write!(err, "[{}]{:.4},", i + 1, total.ppl())?;
            err.flush()?;
        }
        writeln!(err)?;
        Ok(total)
    }
}

fn score_chunk<B: Backend>(
    session: &mut Session<'_, B>,
    chunk: &[u32],
    bos: Option<u32>,
    total: &mut Perplexity,
) -> Result<(), CliError> {
    let mut input = chunk.to_vec();
    if let Some(bos) = bos {
        input[0] = bos;
    }
    let logits = session.forward(&input, 0, OutputRows::All)?;
    let first = chunk.len() / 2;
    for pos in first..chunk.len() - 1 {
        let log_probs = logits::log_softmax(logits.row(pos));
        total.add(-log_probs[chunk[pos + 1] as usize]);
    }
    Ok(())
}
