//! [`Model`]: config + backend + weights, shared by its sessions; [`Session`]: one sequence
//! over a model (its own KV cache and queued draws).

use std::num::NonZeroUsize;
use std::path::Path;

use rullama_gguf::{ByteSource, GgufFile};
use rullama_kernels::StepProfile;

use crate::arch::{self, ArchWeights};
use crate::backend::{Backend, KvCacheSpec, KvLayerSpec, PendingToken, QueueDepth, Sequence};
use crate::chunk::{self, DEFAULT_UBATCH};
use crate::config::ModelConfig;
use crate::error::{ModelError, Result};
use crate::graph::weights::BackendLoader;
use crate::graph::{Graph, OutputRows, StepEnd};
use crate::lora::LoraAdapter;
use crate::lora::attach::{self, LoraTargets, LoraWeights};
use crate::sampler::{Sampler, SamplerError};
use crate::validate;

/// A loaded model on backend `B`. Loading needs it alone; afterwards any number of
/// [`Session`]s borrow it at once, each with its own sequence state.
#[derive(Debug)]
pub struct Model<B: Backend> {
    config: ModelConfig,
    backend: B,
    weights: ArchWeights<B::Weight>,
    /// Tokens a step takes at most: the sessions made from now on start with it.
    ubatch: NonZeroUsize,
    /// What LoRA adapters may update, and what they must match.
    lora_targets: LoraTargets,
    /// The applied LoRA adapters' updates (empty: none).
    lora: LoraWeights<B::Weight>,
    /// The applied LoRA adapters' files and scales.
    loras: Vec<(String, f32)>,
}

/// Logits of one or more rows, `n_vocab` each.
#[derive(Debug, Clone, PartialEq)]
pub struct Logits {
    /// Values per row.
    pub n_vocab: usize,
    /// The rows, one after the other.
    pub data: Vec<f32>,
}

impl Logits {
    /// How many rows there are (one per token asked for, [`OutputRows`]).
    pub fn n_rows(&self) -> usize {
        self.data.len() / self.n_vocab.max(1)
    }

    /// Row `i`: the logits after token `i` of those asked for.
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
        let lora_targets = attach::targets(file, &config)?;
        let mut loader = BackendLoader::new(file, &mut backend);
        let weights = ArchWeights::load(&config, &mut loader)?;
        Ok(Model {
            config,
            backend,
            weights,
            ubatch: DEFAULT_UBATCH,
            lora_targets,
            lora: LoraWeights::default(),
            loras: Vec::new(),
        })
    }

    /// Applies LoRA adapters, each at its scale (llama.cpp's `--lora-scaled`: 1 is the
    /// adapter as trained), in place of any applied before; an empty list removes them.
    /// Every adapter is checked first (its architecture the model's, each pair for a
    /// projection of the model and of its shape: [`crate::LoraError`]), so a refused list
    /// leaves the model as it was. An adapter of scale 0 is checked but left out of the
    /// graph.
    pub fn apply_loras(&mut self, adapters: &[(&LoraAdapter, f32)]) -> Result<()> {
        self.lora_targets
            .check_all(adapters, self.config.arch.name())?;
        self.lora = attach::build(&mut self.backend, adapters, &self.lora_targets.groups)?;
        self.loras = adapters
            .iter()
            .map(|(a, s)| (a.file().to_string(), *s))
            .collect();
        Ok(())
    }

    /// Reads the LoRA GGUF at `path` and applies it alone at `scale`
    /// ([`Model::apply_loras`] with one adapter; several go through that).
    pub fn load_lora(&mut self, path: impl AsRef<Path>, scale: f32) -> Result<()> {
        let adapter = LoraAdapter::open(path)?;
        self.apply_loras(&[(&adapter, scale)])
    }

    /// The projections a LoRA adapter may update, sorted by base tensor name: each one's
    /// name (`blk.0.attn_q.weight`), `n_in` and `n_out` (GGML dims `[n_in, n_out]`).
    pub fn lora_projections(&self) -> Vec<(String, usize, usize)> {
        let mut list: Vec<_> = self
            .lora_targets
            .projections
            .iter()
            .map(|(name, &(n_in, n_out))| (name.clone(), n_in, n_out))
            .collect();
        list.sort();
        list
    }

    /// Puts LoRA matrices that the caller made on this model's executor in place of any
    /// adapter applied: a trainer's parameters, which its executor knows as such. Each entry
    /// is a base tensor name of [`Model::lora_projections`] with `A` (GGML dims
    /// `[n_in, rank]`) and `B` (`[rank, n_out]`); the graph adds `B·(A·x)` to the
    /// projection's output, so any factor belongs in `B` or in the executor's product. A name
    /// that is not a projection is refused ([`crate::LoraError::UnknownTensor`]) and the
    /// model left as it was.
    pub fn set_lora_weights(
        &mut self,
        label: &str,
        pairs: Vec<(String, B::Weight, B::Weight)>,
    ) -> Result<()> {
        if let Some((name, ..)) = pairs
            .iter()
            .find(|(name, ..)| !self.lora_targets.projections.contains_key(name))
        {
            return Err(crate::LoraError::UnknownTensor {
                file: label.to_string(),
                base: name.clone(),
            }
            .into());
        }
        self.lora = LoraWeights::from_pairs(pairs);
        self.loras = vec![(label.to_string(), 1.0)];
        Ok(())
    }

    /// The applied LoRA adapters: each one's file and scale, in the order given.
    pub fn loras(&self) -> &[(String, f32)] {
        &self.loras
    }

    /// The most tokens one step of its sessions takes ([`Session::set_ubatch`]) for the
    /// sessions made from now on (those of [`crate::perplexity::score`] included).
    pub fn set_ubatch(&mut self, ubatch: NonZeroUsize) {
        self.ubatch = ubatch;
    }

    /// What [`Model::set_ubatch`] set ([`crate::DEFAULT_UBATCH`], 4096, unless changed).
    pub fn ubatch(&self) -> NonZeroUsize {
        self.ubatch
    }

    /// Its hyper-parameters.
    pub fn config(&self) -> &ModelConfig {
        &self.config
    }

    /// The executor it was loaded on (the GPU's statistics and memory, say).
    pub fn backend(&self) -> &B {
        &self.backend
    }

    /// The KV cache shape of a sequence of `n_ctx` positions.
    fn kv_spec(&self, n_ctx: usize) -> KvCacheSpec {
        let c = &self.config;
        let layer = KvLayerSpec {
            n_head_kv: c.n_head_kv,
            head_dim_k: c.head_dim_k,
            head_dim_v: c.head_dim_v,
        };
        KvCacheSpec {
            n_ctx,
            layers: vec![layer; c.n_layer],
        }
    }

    /// A new sequence with a KV cache of `n_ctx` positions: 1 to [`validate::MAX_CTX`]
    /// ([`ModelError::InvalidParam`] otherwise), and a cache the executor can hold
    /// ([`ModelError::ContextTooLarge`] says what would fit, before anything is allocated
    /// where the limit is known).
    pub fn session(&self, n_ctx: usize) -> Result<Session<'_, B>> {
        validate::check_context(n_ctx)?;
        Ok(Session {
            model: self,
            seq: self.backend.new_sequence(&self.kv_spec(n_ctx))?,
            n_ctx,
            len: 0,
            ubatch: self.ubatch,
        })
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
}

/// What a step feeds.
#[derive(Debug, Clone, Copy)]
pub enum StepInput<'a> {
    /// Token ids from the host: a prompt, or a token already read back.
    Tokens(&'a [u32]),
    /// The one token `pending` draws (the last draw queued), fed where it is.
    Drawn(&'a PendingToken),
}

impl StepInput<'_> {
    /// The tokens it feeds.
    pub fn len(&self) -> usize {
        match self {
            StepInput::Tokens(t) => t.len(),
            StepInput::Drawn(_) => 1,
        }
    }

    /// Whether it feeds no token.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// One sequence over a shared [`Model`]: its KV cache (`n_ctx` positions, the first `len`
/// filled) and its queued draws. Feed tokens, get logits or sampled tokens.
///
/// A block of tokens longer than a chunk (the ubatch, [`Session::set_ubatch`], lowered
/// where the executor's bindings need it) runs as consecutive steps of at most a chunk
/// each, over the same cache (`chunk.rs`): a 32k-token prompt never holds more than one
/// chunk's activations, and its logits are those of one step.
#[derive(Debug)]
pub struct Session<'m, B: Backend> {
    model: &'m Model<B>,
    seq: B::Sequence,
    n_ctx: usize,
    len: usize,
    ubatch: NonZeroUsize,
}

impl<'m, B: Backend> Session<'m, B> {
    /// The model it runs.
    pub fn model(&self) -> &'m Model<B> {
        self.model
    }

    /// The executor's state of this sequence (its KV cache, its queued draws).
    pub fn sequence(&self) -> &B::Sequence {
        &self.seq
    }

    /// The executor's state of this sequence, to work on: a trainer's executor reads its
    /// recorded step through it ([`Session::record_logits`]).
    pub fn sequence_mut(&mut self) -> &mut B::Sequence {
        &mut self.seq
    }

    /// Records `tokens` at positions `start_pos..` as one step (no chunks) with the logits
    /// of every row, and returns that logits handle unread: for an executor whose caller
    /// goes on from the handle (a trainer takes the loss from it and walks the step
    /// backward), where [`Session::forward`] would read the logits back. The same checks as
    /// `forward`: token ids, positions within the context.
    pub fn record_logits(
        &mut self,
        tokens: &[u32],
        start_pos: usize,
    ) -> Result<<B::Sequence as Sequence>::Tensor> {
        let end = StepEnd::Logits(OutputRows::All);
        let logits = self.record(StepInput::Tokens(tokens), start_pos, end)?;
        self.len = start_pos + tokens.len();
        Ok(logits)
    }

    /// Records several whole sequences as one step, each from position 0: `tokens` holds
    /// them in turn, `lens[i]` tokens the i-th, and positions restart at each. For an
    /// executor that attends within the step and keeps no cache (a trainer's: its attention
    /// tells the sequences apart by where positions restart), so that a batch of sequences
    /// is one step's products; an executor with a KV cache would write them over each other.
    /// The logits of every row come back unread, as [`Session::record_logits`]'s. Each
    /// sequence must fit the context, and the lengths must add up to the tokens.
    pub fn record_packed(
        &mut self,
        tokens: &[u32],
        lens: &[usize],
    ) -> Result<<B::Sequence as Sequence>::Tensor> {
        let model = self.model;
        model.check_tokens(tokens)?;
        if lens.contains(&0) || lens.iter().sum::<usize>() != tokens.len() {
            return Err(ModelError::Unsupported(format!(
                "packed lengths {lens:?} for {} tokens (each at least 1, summing to the tokens)",
                tokens.len()
            )));
        }
        for &n in lens {
            self.check_positions(n, 0)?;
        }
        let positions: Vec<u32> = lens.iter().flat_map(|&n| 0..n as u32).collect();
        let end = StepEnd::Logits(OutputRows::All);
        self.record_at(StepInput::Tokens(tokens), &positions, end)
    }

    /// Positions held in the cache.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the cache holds nothing yet.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Positions the cache can hold.
    pub fn n_ctx(&self) -> usize {
        self.n_ctx
    }

    /// Sets the most tokens one step takes (llama.cpp's physical batch, `-ub`): a longer
    /// block runs in chunks of this many, each a step of its own at its start position (the
    /// last one shorter), with the same logits as one step (the CPU reference's bit for bit,
    /// the GPU's to rounding). Where one chunk's widest activation would not fit the
    /// executor's largest binding, chunks are shorter still ([`Session::chunk_len`]). A new
    /// session starts with its model's ([`Model::set_ubatch`]).
    pub fn set_ubatch(&mut self, ubatch: NonZeroUsize) {
        self.ubatch = ubatch;
    }

    /// What [`Session::set_ubatch`] set.
    pub fn ubatch(&self) -> NonZeroUsize {
        self.ubatch
    }

    /// The most tokens one step of this [`Session`] takes when it returns `output`'s
    /// logits: the ubatch, or fewer where the executor bounds an activation
    /// ([`Backend::max_activation_bytes`]; every row's logits are the widest activation of a
    /// large vocabulary).
    pub fn chunk_len(&self, output: OutputRows) -> usize {
        let widest = chunk::widest_row(&self.model.config, output);
        chunk::chunk_len(
            self.ubatch,
            widest,
            self.model.backend.max_activation_bytes(),
        )
    }

    /// Run `tokens` at positions `start_pos..start_pos + n` (a prompt block or one token:
    /// the same graph). `start_pos` may rewind the cache but not skip past its end. A block
    /// longer than [`Session::chunk_len`] runs in chunks: with [`OutputRows::All`] each
    /// returns its rows; with [`OutputRows::Last`] the leading ones only fill the cache.
    pub fn forward(
        &mut self,
        tokens: &[u32],
        start_pos: usize,
        output: OutputRows,
    ) -> Result<Logits> {
        self.check(tokens, start_pos)?;
        let len = self.chunk_len(output);
        let data = match output {
            OutputRows::Last => {
                let last = self.fill_leading(tokens, start_pos, len)?;
                self.forward_step(&tokens[last.clone()], start_pos + last.start, output)?
            }
            OutputRows::All => {
                let mut data = Vec::new();
                for c in chunk::chunks(tokens.len(), len) {
                    let rows =
                        self.forward_step(&tokens[c.clone()], start_pos + c.start, output)?;
                    data.extend(rows);
                }
                data
            }
        };
        Ok(Logits {
            n_vocab: self.model.config.n_vocab,
            data,
        })
    }

    /// One step of `tokens` (at most a chunk) and its logits.
    fn forward_step(
        &mut self,
        tokens: &[u32],
        start_pos: usize,
        output: OutputRows,
    ) -> Result<Vec<f32>> {
        let step = StepEnd::Logits(output);
        let logits = self.record(StepInput::Tokens(tokens), start_pos, step)?;
        let data = self.seq.read(&logits)?;
        self.len = start_pos + tokens.len();
        Ok(data)
    }

    /// Runs every chunk of `tokens` (in chunks of `len`) but the last as a step that only
    /// fills the cache ([`Sequence::run`]: nothing read back, the host not waiting); the
    /// range of the last chunk, for the step whose logits are wanted.
    fn fill_leading(
        &mut self,
        tokens: &[u32],
        start_pos: usize,
        len: usize,
    ) -> Result<std::ops::Range<usize>> {
        let mut steps = chunk::chunks(tokens.len(), len).peekable();
        while let Some(c) = steps.next() {
            if steps.peek().is_none() {
                return Ok(c);
            }
            let at = start_pos + c.start;
            let end = self.record(StepInput::Tokens(&tokens[c.clone()]), at, StepEnd::Cache)?;
            self.seq.run(&end)?;
            self.len = start_pos + c.end;
        }
        Err(ModelError::EmptyInput)
    }

    /// The checks of a whole block (tokens, positions) before any chunk of it runs, so a
    /// bad block leaves the cache as it was.
    fn check(&self, tokens: &[u32], start_pos: usize) -> Result<()> {
        self.model.check_tokens(tokens)?;
        self.check_positions(tokens.len(), start_pos)
    }

    /// Append `tokens` after what the cache holds; the next-token logits.
    pub fn feed(&mut self, tokens: &[u32]) -> Result<Vec<f32>> {
        let start = self.len;
        Ok(self.forward(tokens, start, OutputRows::Last)?.data)
    }

    /// Run `tokens` as [`Session::forward`] does and pick the next token with `sampler`: on
    /// the executor's device when it samples there and the sampler's configuration is one it
    /// implements ([`Sampler::device_draw`]; only the id comes back), else from the last
    /// row of logits read back. Does not [`accept`](Sampler::accept) the token.
    pub fn forward_sample(
        &mut self,
        tokens: &[u32],
        start_pos: usize,
        sampler: &mut Sampler,
    ) -> Result<u32> {
        let pending = self.queue_sample(StepInput::Tokens(tokens), start_pos, sampler)?;
        self.take_token(pending)
    }

    /// As [`Session::forward_sample`], without waiting for a token drawn on the device: the
    /// next step can be queued behind it ([`StepInput::Drawn`]) before
    /// [`Session::take_token`] reads it. The cache counts the step's positions from now on.
    pub fn queue_sample(
        &mut self,
        input: StepInput<'_>,
        start_pos: usize,
        sampler: &mut Sampler,
    ) -> Result<PendingToken> {
        let (input, start_pos) = match input {
            StepInput::Tokens(tokens) => {
                self.check(tokens, start_pos)?;
                let len = self.chunk_len(OutputRows::Last);
                let last = self.fill_leading(tokens, start_pos, len)?;
                let at = start_pos + last.start;
                (StepInput::Tokens(&tokens[last]), at)
            }
            drawn => (drawn, start_pos),
        };
        let logits = self.record(input, start_pos, StepEnd::Logits(OutputRows::Last))?;
        let k_max = self.seq.device_top_k();
        let end = start_pos + input.len();
        // The step has run (or is queued) once the call returns; the cache then holds the
        // tokens even if no token can be drawn.
        match (k_max > 0).then(|| sampler.device_draw(k_max)).flatten() {
            Some(draw) => {
                let pending = self.seq.queue_sample(&logits, &draw);
                self.len = end;
                pending
            }
            None => {
                let data = self.seq.read(&logits)?;
                self.len = end;
                Ok(PendingToken::Ready(Some(sampler.sample(&data)?)))
            }
        }
    }

    /// Waits for a token [`Session::queue_sample`] draws.
    pub fn take_token(&mut self, pending: PendingToken) -> Result<u32> {
        Ok(self
            .seq
            .take_token(pending)?
            .ok_or(SamplerError::NoFiniteLogits)?)
    }

    /// Forgets the positions from `len` on (steps queued ahead whose tokens were not kept),
    /// and drops those of them the executor has not submitted yet
    /// ([`Sequence::drop_unsubmitted`]); the next step may start there.
    pub fn rewind(&mut self, len: usize) {
        self.seq.drop_unsubmitted();
        self.len = self.len.min(len);
    }

    /// See [`Sequence::submit_queued`].
    pub fn submit_queued(&mut self) -> Result<()> {
        self.seq.submit_queued()
    }

    /// See [`QueueDepth`].
    pub fn queue_depth(&self) -> QueueDepth {
        self.seq.queue_depth()
    }

    /// See [`Sequence::profile_last_step`].
    pub fn profile_last_step(&mut self) -> Result<Option<StepProfile>> {
        self.seq.profile_last_step()
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

    /// Checks the input and records (or runs) the graph of one step; the handle of its
    /// logits (or, for [`StepEnd::Cache`], of its last row's final norm).
    fn record(
        &mut self,
        input: StepInput<'_>,
        start_pos: usize,
        end: StepEnd,
    ) -> Result<<B::Sequence as Sequence>::Tensor> {
        let model = self.model;
        if let StepInput::Tokens(tokens) = input {
            model.check_tokens(tokens)?;
        }
        let n = input.len();
        self.check_positions(n, start_pos)?;
        let positions: Vec<u32> = (start_pos..start_pos + n).map(|p| p as u32).collect();
        self.record_at(input, &positions, end)
    }

    /// Records `input` at `positions` (one each, checked by the caller) as one step.
    fn record_at(
        &mut self,
        input: StepInput<'_>,
        positions: &[u32],
        end: StepEnd,
    ) -> Result<<B::Sequence as Sequence>::Tensor> {
        let model = self.model;
        let seq = &mut self.seq;
        let tokens = match input {
            StepInput::Tokens(tokens) => seq.ids(tokens),
            StepInput::Drawn(pending) => seq.drawn_ids(pending)?,
        };
        let positions = seq.ids(positions);
        let mut graph = Graph {
            ops: seq,
            cfg: &model.config,
            tokens: &tokens,
            positions: &positions,
            n_tokens: input.len(),
            end,
            lora: &model.lora,
        };
        Ok(arch::forward(&mut graph, &model.weights))
    }

    fn check_positions(&self, n_tokens: usize, start_pos: usize) -> Result<()> {
        if start_pos > self.len {
            return Err(ModelError::PositionGap {
                start_pos,
                cached: self.len,
            });
        }
        if start_pos
            .checked_add(n_tokens)
            .is_none_or(|end| end > self.n_ctx)
        {
            return Err(ModelError::ContextOverflow {
                start_pos,
                n_tokens,
                n_ctx: self.n_ctx,
            });
        }
        Ok(())
    }
}
