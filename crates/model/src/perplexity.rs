//! Perplexity by llama-perplexity's method, shared by `rullama perplexity` and
//! `cargo xtask parity --models` so their figures come from one implementation.
//!
//! The caller tokenizes the text whole (with BOS where the model adds it); [`score`] cuts it
//! into chunks of `ctx` tokens. Each chunk runs from an empty cache with its first token
//! replaced by BOS (where the model adds BOS), and only the second half is scored: the logits
//! at positions `ctx/2 ..= ctx-2` predict tokens `ctx/2+1 ..= ctx-1`, so every scored token
//! has at least half a context of history. PPL = exp(mean NLL); its error is the standard
//! error of the mean NLL carried through exp, as llama.cpp prints it.

use crate::{Backend, Model, ModelError, OutputRows, Result, Session, logits};

/// The running sums llama.cpp keeps.
#[derive(Debug, Default, Clone, Copy)]
pub struct Perplexity {
    nll: f64,
    nll2: f64,
    count: usize,
}

impl Perplexity {
    /// Add one scored token's negative log-likelihood (nats).
    pub fn add(&mut self, nll: f64) {
        self.nll += nll;
        self.nll2 += nll * nll;
        self.count += 1;
    }

    /// Tokens scored so far.
    pub fn count(&self) -> usize {
        self.count
    }

    /// The perplexity: `exp` of the mean negative log-likelihood.
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

/// What to score: the whole text's tokens, cut into `n_chunks` chunks of `ctx`.
#[derive(Debug, Clone, Copy)]
pub struct Chunks<'a> {
    /// The text's tokens.
    pub tokens: &'a [u32],
    /// Tokens per chunk: each is scored from an empty cache, its second half counted.
    pub ctx: usize,
    /// Chunks to score, from the start (at most [`Chunks::available`]).
    pub n_chunks: usize,
    /// Replaces each chunk's first token (`Some` where the model adds BOS).
    pub bos: Option<u32>,
}

impl Chunks<'_> {
    /// Whole chunks of `ctx` the tokens hold.
    pub fn available(tokens: &[u32], ctx: usize) -> usize {
        tokens.len().checked_div(ctx).unwrap_or(0)
    }
}

/// Score the chunks in order, calling `progress(chunk_index, running_total)` after each (the
/// CLI prints llama-perplexity's running figure with it).
pub fn score<B: Backend>(
    model: &Model<B>,
    chunks: Chunks<'_>,
    mut progress: impl FnMut(usize, &Perplexity),
) -> Result<Perplexity> {
    let Chunks {
        tokens,
        ctx,
        n_chunks,
        bos,
    } = chunks;
    // Half a chunk must hold at least one scored position (ctx/2 ..= ctx-2).
    if ctx < 4 {
        return Err(ModelError::Perplexity(format!(
            "context {ctx} is too small to score half a chunk"
        )));
    }
    if n_chunks == 0 || n_chunks > Chunks::available(tokens, ctx) {
        return Err(ModelError::Perplexity(format!(
            "{n_chunks} chunks of {ctx} asked of {} tokens",
            tokens.len()
        )));
    }
    let mut session = model.session(ctx)?;
    let mut total = Perplexity::default();
    for (i, chunk) in tokens.chunks_exact(ctx).take(n_chunks).enumerate() {
        score_chunk(&mut session, chunk, bos, &mut total)?;
        progress(i, &total);
    }
    Ok(total)
}

/// One chunk from an empty cache, all positions in one forward pass.
fn score_chunk<B: Backend>(
    session: &mut Session<'_, B>,
    chunk: &[u32],
    bos: Option<u32>,
    total: &mut Perplexity,
) -> Result<()> {
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
