//! [`Model`]: config + backend + weights; [`KvCache`]; [`Session`], a model with one cache.

use std::path::Path;

use rullama_gguf::{ByteSource, GgufFile};

use crate::arch::{self, ArchWeights};
use crate::backend::{Backend, KvCacheSpec, KvLayerSpec, PendingToken};
use crate::config::ModelConfig;
use crate::error::{ModelError, Result};
use crate::graph::weights::{BackendLoader, Checker};
use crate::graph::{Graph, OutputRows};
use crate::sampler::{Sampler, SamplerError};

/// A loaded model on backend `B`.
#[derive(Debug)]
pub struct Model<B: Backend> {
    config: ModelConfig,
    backend: B,
    weights: ArchWeights<B::Weight>,
}

/// A backend's KV cache with the number of positions it holds.
#[derive(Debug)]
pub struct KvCache<B: Backend> {
    inner: B::KvCache,
    n_ctx: usize,
    len: usize,
}

impl<B: Backend> KvCache<B> {
    /// Positions it can hold.
    pub fn n_ctx(&self) -> usize {
        self.n_ctx
    }

    /// Positions filled so far (`0..len`).
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// Logits of one or more rows, `n_vocab` each.
#[derive(Debug, Clone, PartialEq)]
pub struct Logits {
    pub n_vocab: usize,
    pub data: Vec<f32>,
}

impl Logits {
    pub fn n_rows(&self) -> usize {
        self.data.len() / self.n_vocab.max(1)
    }

    pub fn row(&self, i: usize) -> &[f32] {
        &self.data[i * self.n_vocab..(i + 1) * self.n_vocab]
    }

    /// The last row (the next-token logits).
    pub fn last(&self) -> &[f32] {
        self.row(self.n_rows() - 1)
    }
}

impl<B: Backend> Model<B> {
    /// Open, check and load the model at `path`. The weights are read tensor by tensor
    /// (`GgufFile::open_ranged`), not mapped: every backend copies them anyway, and a file
    /// cut while it loads is then an error naming the file and tensor, never a SIGBUS.
    pub fn open(path: impl AsRef<Path>, backend: B) -> Result<Model<B>> {
        let file = GgufFile::open_ranged(path)?;
        Model::load(&file, backend)
    }

    /// Check that `file` has every tensor its architecture needs, at the right shapes
    /// (reporting all missing ones at once), then hand each to the backend once.
    pub fn load<S: ByteSource>(file: &GgufFile<S>, mut backend: B) -> Result<Model<B>> {
        let config = ModelConfig::from_gguf(file)?;
        let mut checker = Checker::new(file);
        ArchWeights::load(&config, &mut checker)?;
        checker.finish()?;
        let mut loader = BackendLoader::new(file, &mut backend);
        let weights = ArchWeights::load(&config, &mut loader)?;
        Ok(Model {
            config,
            backend,
            weights,
        })
    }

    pub fn config(&self) -> &ModelConfig {
        &self.config
    }

    pub fn backend(&self) -> &B {
        &self.backend
    }

    pub fn backend_mut(&mut self) -> &mut B {
        &mut self.backend
    }

    /// A cache for `n_ctx` positions.
    pub fn new_cache(&mut self, n_ctx: usize) -> Result<KvCache<B>> {
        if n_ctx == 0 {
            return Err(ModelError::InvalidConfig("a context of 0 positions".into()));
        }
        let c = &self.config;
        let layer = KvLayerSpec {
            n_head_kv: c.n_head_kv,
            head_dim_k: c.head_dim_k,
            head_dim_v: c.head_dim_v,
        };
        let spec = KvCacheSpec {
            n_ctx,
            layers: vec![layer; c.n_layer],
        };
        Ok(KvCache {
            inner: self.backend.new_kv_cache(&spec)?,
            n_ctx,
            len: 0,
        })
    }

    /// A session with its own cache of `n_ctx` positions.
    pub fn session(&mut self, n_ctx: usize) -> Result<Session<'_, B>> {
        let cache = self.new_cache(n_ctx)?;
        Ok(self.session_with(cache))
    }

    /// A session over a cache [`Model::new_cache`] made.
    pub fn session_with(&mut self, cache: KvCache<B>) -> Session<'_, B> {
        Session { model: self, cache }
    }

    /// Run `tokens` at positions `start_pos..start_pos + n` (a prompt block or one token:
    /// the same graph). `start_pos` may rewind the cache but not skip past its end.
    pub fn forward(
        &mut self,
        cache: &mut KvCache<B>,
        tokens: &[u32],
        start_pos: usize,
        output: OutputRows,
    ) -> Result<Logits> {
        let logits = self.record(cache, Input::Tokens(tokens), start_pos, output)?;
        let data = self.backend.read(&logits)?;
        cache.len = start_pos + tokens.len();
        Ok(Logits {
            n_vocab: self.config.n_vocab,
            data,
        })
    }

    /// Run `tokens` as [`Model::forward`] does and pick the next token with `sampler`: on the
    /// backend's device when it samples there and the sampler's configuration is one it
    /// implements ([`Sampler::device_draw`]; only the id comes back), else from the last
    /// row of logits read back. Does not [`accept`](Sampler::accept) the token.
    pub fn forward_sample(
        &mut self,
        cache: &mut KvCache<B>,
        tokens: &[u32],
        start_pos: usize,
        sampler: &mut Sampler,
    ) -> Result<u32> {
        let pending = self.queue_sample(cache, Input::Tokens(tokens), start_pos, sampler)?;
        self.take_token(pending)
    }

    /// As [`Model::forward_sample`], without waiting for a token drawn on the device: the
    /// next step can be queued behind it ([`Input::Drawn`]) before [`Model::take_token`]
    /// reads it. The cache counts the step's positions from now on.
    pub fn queue_sample(
        &mut self,
        cache: &mut KvCache<B>,
        input: Input<'_>,
        start_pos: usize,
        sampler: &mut Sampler,
    ) -> Result<PendingToken> {
        let logits = self.record(cache, input, start_pos, OutputRows::Last)?;
        let k_max = self.backend.device_top_k();
        let end = start_pos + input.len();
        // The step has run (or is queued) once the call returns; the cache then holds the
        // tokens even if no token can be drawn.
        match (k_max > 0).then(|| sampler.device_draw(k_max)).flatten() {
            Some(draw) => {
                let pending = self.backend.queue_sample(&logits, &draw);
                cache.len = end;
                pending
            }
            None => {
                let data = self.backend.read(&logits)?;
                cache.len = end;
                Ok(PendingToken::Ready(Some(sampler.sample(&data)?)))
            }
        }
    }

    /// Waits for a token [`Model::queue_sample`] draws.
    pub fn take_token(&mut self, pending: PendingToken) -> Result<u32> {
        Ok(self
            .backend
            .take_token(pending)?
            .ok_or(SamplerError::NoFiniteLogits)?)
    }

    /// Checks the input and records (or runs) the graph; the handle of its logits.
    fn record(
        &mut self,
        cache: &mut KvCache<B>,
        input: Input<'_>,
        start_pos: usize,
        output: OutputRows,
    ) -> Result<B::Tensor> {
        if let Input::Tokens(tokens) = input {
            self.check_tokens(tokens)?;
        }
        let n = input.len();
        Self::check_positions(cache, n, start_pos)?;
        let positions: Vec<u32> = (start_pos..start_pos + n).map(|p| p as u32).collect();
        let b = &mut self.backend;
        let tokens = match input {
            Input::Tokens(tokens) => b.ids(tokens),
            Input::Drawn(pending) => b.drawn_ids(pending)?,
        };
        let positions = b.ids(&positions);
        let mut graph = Graph {
            b,
            cfg: &self.config,
            cache: &mut cache.inner,
            tokens: &tokens,
            positions: &positions,
            n_tokens: n,
            output,
        };
        Ok(arch::forward(&mut graph, &self.weights))
    }

    fn check_tokens(&self, tokens: &[u32]) -> Result<()> {
        if tokens.is_empty() {
            return Err(ModelError::EmptyInput);
        }
        let n_vocab = self.config.n_vocab;
        if let Some((index, &id)) = tokens
            .iter()
            .enumerate()
            .find(|(_, id)| **id as usize >= n_vocab)
        {
            return Err(ModelError::TokenOutOfRange { index, id, n_vocab });
        }
        Ok(())
    }

    fn check_positions(cache: &KvCache<B>, n_tokens: usize, start_pos: usize) -> Result<()> {
        if start_pos > cache.len {
            return Err(ModelError::PositionGap {
                start_pos,
                cached: cache.len,
            });
        }
        if start_pos + n_tokens > cache.n_ctx {
            return Err(ModelError::ContextOverflow {
                start_pos,
                n_tokens,
                n_ctx: cache.n_ctx,
            });
        }
        Ok(())
    }
}

/// What a step feeds.
#[derive(Debug, Clone, Copy)]
pub enum Input<'a> {
    /// Token ids from the host: a prompt, or a token already read back.
    Tokens(&'a [u32]),
    /// The one token `pending` draws (the last draw queued), fed where it is.
    Drawn(&'a PendingToken),
}

impl Input<'_> {
    pub fn len(&self) -> usize {
        match self {
            Input::Tokens(t) => t.len(),
            Input::Drawn(_) => 1,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A model and one KV cache: feed tokens, get logits.
#[derive(Debug)]
pub struct Session<'m, B: Backend> {
    model: &'m mut Model<B>,
    cache: KvCache<B>,
}

impl<B: Backend> Session<'_, B> {
    pub fn model(&self) -> &Model<B> {
        self.model
    }

    pub fn model_mut(&mut self) -> &mut Model<B> {
        self.model
    }

    /// Positions held in the cache.
    pub fn len(&self) -> usize {
        self.cache.len()
    }

    pub fn is_empty(&self) -> bool {
        self.cache.is_empty()
    }

    pub fn n_ctx(&self) -> usize {
        self.cache.n_ctx()
    }

    /// See [`Model::forward`].
    pub fn forward(
        &mut self,
        tokens: &[u32],
        start_pos: usize,
        output: OutputRows,
    ) -> Result<Logits> {
        self.model
            .forward(&mut self.cache, tokens, start_pos, output)
    }

    /// Append `tokens` after what the cache holds; the next-token logits.
    pub fn feed(&mut self, tokens: &[u32]) -> Result<Vec<f32>> {
        let start = self.cache.len();
        Ok(self.forward(tokens, start, OutputRows::Last)?.data)
    }

    /// Run `tokens` from `start_pos` and pick the next token with `sampler` (see
    /// [`Model::forward_sample`]).
    pub fn forward_sample(
        &mut self,
        tokens: &[u32],
        start_pos: usize,
        sampler: &mut Sampler,
    ) -> Result<u32> {
        self.model
            .forward_sample(&mut self.cache, tokens, start_pos, sampler)
    }

    /// See [`Model::queue_sample`].
    pub fn queue_sample(
        &mut self,
        input: Input<'_>,
        start_pos: usize,
        sampler: &mut Sampler,
    ) -> Result<PendingToken> {
        self.model
            .queue_sample(&mut self.cache, input, start_pos, sampler)
    }

    /// See [`Model::take_token`].
    pub fn take_token(&mut self, pending: PendingToken) -> Result<u32> {
        self.model.take_token(pending)
    }

    /// Forgets the positions from `len` on (steps queued ahead whose tokens were not kept),
    /// and drops those of them the backend has not submitted yet
    /// ([`Backend::drop_unsubmitted`]); the next step may start there.
    pub fn rewind(&mut self, len: usize) {
        self.model.backend.drop_unsubmitted();
        self.cache.len = self.cache.len.min(len);
    }

    /// See [`Backend::submit_queued`].
    pub fn submit_queued(&mut self) -> Result<()> {
        self.model.backend.submit_queued()
    }

    /// See [`Backend::steps_per_submit`].
    pub fn steps_per_submit(&self) -> usize {
        self.model.backend.steps_per_submit()
    }

    /// Greedy generation: feed `prompt`, then `n` times append the arg-max token.
    pub fn greedy(&mut self, prompt: &[u32], n: usize) -> Result<Vec<u32>> {
        let mut logits = self.feed(prompt)?;
        let mut out = Vec::with_capacity(n);
        for i in 0..n {
            let next = crate::logits::argmax(&logits) as u32;
            out.push(next);
            if i + 1 < n {
                logits = self.feed(&[next])?;
            }
        }
        Ok(out)
    }
}
