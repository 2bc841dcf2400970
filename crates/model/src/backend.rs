//! The two traits an executor implements, and the parameter structs of the ops.
//!
//! - [`Backend`]: what belongs to the device and is shared by every sequence of a model —
//!   the weights, and on the GPU the pipelines, the built plans and their buffer pool. It is
//!   mutated only while the model loads; afterwards [`crate::Model`] hands out `&Backend`.
//! - [`Sequence`]: what belongs to one sequence — its KV cache and its queue of tokens being
//!   drawn — and the op set one step of the graph records over it. Each
//!   [`crate::Session`] owns one, so several sessions can run over one loaded model.
//!
//! The graph (`arch/*.rs` over `graph/`) only ever calls the op methods; it never looks at
//! data. Ops take sequence-owned handles and return new ones, so an executor may run them at
//! once (the CPU reference) or record them as dispatches to run later (the GPU). Shapes are
//! `[rows, cols]` row-major, one row per token; "heads" are consecutive column groups.
//!
//! Ops do not return `Result`: shapes are checked when weights are loaded, so a shape error
//! inside a step is a bug. A sequence that can fail during a step (out of memory, device
//! lost) keeps the error and reports it from [`Sequence::read`].

use std::fmt::Debug;
use std::ops::Range;

use rullama_gguf::TensorView;
use rullama_kernels::StepProfile;

use crate::config::{Activation, RopeStyle};
use crate::error::{ModelError, Result};
use crate::memory::DeviceMemory;
use crate::sampler::DeviceDraw;
use crate::sampler::SamplerError;

/// RMS normalisation of every `group` consecutive values of a row:
/// `y = x / sqrt(mean(x^2) + eps) * weight`. `group` is the row length for a whole-row norm
/// and the head dim for per-head q/k norms; `weight` then has `group` values.
#[derive(Debug, Clone, Copy)]
pub struct RmsNormParams<'w, W> {
    /// The gain, `group` values; `None` for an unweighted norm.
    pub weight: Option<&'w W>,
    /// Added to the mean square before the root.
    pub eps: f32,
    /// Values normalised together: the row length or the head dim.
    pub group: usize,
}

/// Rotary embedding of every head (`head_dim` consecutive columns) of a row, by that row's
/// position: the first `n_rot` dims of a head rotate in pairs picked by `style`, by angle
/// `pos * freq_scale * base^(-2i/n_rot)` for pair `i`; the rest pass through.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RopeParams {
    /// Columns per head.
    pub head_dim: usize,
    /// Dims of a head that rotate (at most `head_dim`, even).
    pub n_rot: usize,
    /// The frequency base (`rope.freq_base`).
    pub base: f32,
    /// Multiplies every position (linear RoPE scaling; 1 without it).
    pub freq_scale: f32,
    /// Which dims pair up.
    pub style: RopeStyle,
}

/// Causal attention of one layer over its sequence's KV cache.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AttentionParams {
    /// Which layer's slot of the cache to append to and read.
    pub layer: usize,
    /// Query heads.
    pub n_head: usize,
    /// Key/value heads; each serves `n_head / n_head_kv` query heads (grouped-query
    /// attention).
    pub n_head_kv: usize,
    /// Dims of a query or key head.
    pub head_dim_k: usize,
    /// Dims of a value head.
    pub head_dim_v: usize,
    /// Multiplies `q·k`.
    pub scale: f32,
    /// A query at position `p` sees keys at `j <= p` with `p - j < window`.
    pub window: Option<usize>,
    /// `cap * tanh(s / cap)` on the scaled scores.
    pub softcap: Option<f32>,
}

/// The tensors one attention op reads. `q`: `[n, n_head * head_dim_k]`, `k`:
/// `[n, n_head_kv * head_dim_k]`, `v`: `[n, n_head_kv * head_dim_v]`, `positions`: `n` ids.
#[derive(Debug)]
pub struct AttentionInputs<'a, T, I> {
    /// The queries, after RoPE.
    pub q: &'a T,
    /// The step's keys, after RoPE, to append to the cache.
    pub k: &'a T,
    /// The step's values, to append to the cache.
    pub v: &'a T,
    /// Each row's position: where its k and v go, and which keys its query sees.
    pub positions: &'a I,
}

/// The shape of a KV cache: `n_ctx` positions for each layer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KvCacheSpec {
    /// Positions each layer holds.
    pub n_ctx: usize,
    /// One entry per layer, in layer order.
    pub layers: Vec<KvLayerSpec>,
}

/// The shape of one layer's cache: a key and a value of every KV head per position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KvLayerSpec {
    /// Key/value heads.
    pub n_head_kv: usize,
    /// Dims of a key head.
    pub head_dim_k: usize,
    /// Dims of a value head.
    pub head_dim_v: usize,
}

/// A linear layer's tensors as the file has them: its matrix and its bias, if any.
#[derive(Debug, Clone, Copy)]
pub struct LinearView<'a> {
    /// The matrix, GGML dims `[n_in, n_out]`.
    pub weight: TensorView<'a>,
    /// The bias, `n_out` values (Qwen2's q/k/v).
    pub bias: Option<TensorView<'a>>,
}

/// A loaded linear layer: its matrix and its bias, if any.
pub type LinearWeights<W> = (W, Option<W>);

/// The device side of an executor: the weights and whatever every sequence shares. Loading
/// takes `&mut self`; everything after it `&self`, so sessions can share the model.
pub trait Backend: Debug {
    /// A weight uploaded (or kept) once at load; cheap to clone (tied embeddings share one).
    type Weight: Clone + Debug;
    /// One sequence's state and the op set its steps record.
    type Sequence: Sequence<Weight = Self::Weight>;

    /// Take a weight from the file (quantized or f32, GGML dims). Called once per tensor.
    fn load_weight(&mut self, view: TensorView<'_>) -> Result<Self::Weight>;
    /// Take the linears that the graph multiplies with one input (q, k and v; gate and up),
    /// in the graph's order, instead of one [`Backend::load_weight`] per tensor. A backend
    /// may keep the matrices of one format and width stacked (one matrix, their rows in
    /// turn, and their biases likewise) so that one product computes them all; each handle
    /// still names one tensor. The default loads each tensor alone.
    fn load_linears(
        &mut self,
        linears: &[LinearView<'_>],
    ) -> Result<Vec<LinearWeights<Self::Weight>>> {
        linears
            .iter()
            .map(|l| {
                let weight = self.load_weight(l.weight)?;
                let bias = l.bias.map(|b| self.load_weight(b)).transpose()?;
                Ok((weight, bias))
            })
            .collect()
    }

    /// A new sequence with an empty KV cache of `spec`'s shape.
    fn new_sequence(&self, spec: &KvCacheSpec) -> Result<Self::Sequence>;

    /// The most bytes one activation of a step may take (the GPU's largest storage binding),
    /// which bounds the tokens of a step ([`crate::Session`] runs a longer block in chunks);
    /// `None` (the default): no bound but memory (the host).
    fn max_activation_bytes(&self) -> Option<u64> {
        None
    }

    /// Bytes the backend holds on its device now, by role, every live sequence's included;
    /// `None` (the default): it computes on the host.
    fn device_memory(&self) -> Option<DeviceMemory> {
        None
    }
}

/// How deep a sequence's queue of draws runs — the one place where the generator, the
/// sequence and its plans agree on it.
///
/// A GPU sequence records `steps_per_submit` decode steps into one submission (one compute
/// pass), each drawing its token into its own token slot (the plan's copy `c` draws into
/// slot `c` and reads slot `c - 1`, so the steps chain on the device). A
/// [`crate::Generator`] keeps two submissions' worth of draws queued, so the device always
/// has a submission behind the one whose ids the host waits for, and the ids travel back
/// through a ring of staging slots deep enough for every draw that may be in flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueDepth {
    steps_per_submit: usize,
}

impl QueueDepth {
    /// At least one step a submission.
    pub fn new(steps_per_submit: usize) -> QueueDepth {
        QueueDepth {
            steps_per_submit: steps_per_submit.max(1),
        }
    }

    /// Steps recorded into one submission; also the number of token slots and of a plan's
    /// copies (one per step of a submission).
    pub fn steps_per_submit(self) -> usize {
        self.steps_per_submit
    }

    /// Draws a generator keeps queued: two submissions.
    pub fn queued_draws(self) -> usize {
        2 * self.steps_per_submit
    }

    /// Staging slots for the drawn ids: the draws a generator keeps queued, those of the
    /// submission being recorded, and one spare. A read ticket older than this is dead (its
    /// slot was reused).
    pub fn read_slots(self) -> usize {
        3 * self.steps_per_submit + 1
    }
}

impl Default for QueueDepth {
    /// One step a submission: every draw is submitted at once.
    fn default() -> Self {
        QueueDepth::new(1)
    }
}

/// One sequence on an executor: its KV cache and queued draws, and the op set a step of the
/// graph records over them.
pub trait Sequence: Debug {
    /// A weight of the [`Backend`] the sequence runs on.
    type Weight: Clone + Debug;
    /// An f32 activation `[rows, cols]`.
    type Tensor: Debug;
    /// Token ids or positions, one per row.
    type Ids: Debug;

    /// Ids the host supplies for a step: the tokens, their positions.
    fn ids(&mut self, ids: &[u32]) -> Self::Ids;

    /// Row `ids[i]` of `table` (`[d, n_vocab]` in GGML dims), as f32: `[n, d]`.
    fn embed(&mut self, table: &Self::Weight, ids: &Self::Ids) -> Self::Tensor;
    /// `x · Wᵀ`: `x` is `[n, n_in]`, `w` has GGML dims `[n_in, n_out]`; result `[n, n_out]`.
    fn matmul(&mut self, w: &Self::Weight, x: &Self::Tensor) -> Self::Tensor;
    /// `x + bias` on every row.
    fn add_bias(&mut self, x: &Self::Tensor, bias: &Self::Weight) -> Self::Tensor;
    /// RMS norm of every `p.group` values of each row (see [`RmsNormParams`]).
    fn rms_norm(&mut self, x: &Self::Tensor, p: &RmsNormParams<'_, Self::Weight>) -> Self::Tensor;
    /// Rotary embedding of every head of each row, by the row's position (see
    /// [`RopeParams`]).
    fn rope(&mut self, x: &Self::Tensor, positions: &Self::Ids, p: &RopeParams) -> Self::Tensor;
    /// Append `k`, `v` at `positions` to the layer's slot of this sequence's cache, then
    /// attend every query row to the cached keys its position may see. Result
    /// `[n, n_head * head_dim_v]`.
    fn attention(
        &mut self,
        x: AttentionInputs<'_, Self::Tensor, Self::Ids>,
        p: &AttentionParams,
    ) -> Self::Tensor;
    /// `act(gate) * up`, element-wise.
    fn glu(&mut self, gate: &Self::Tensor, up: &Self::Tensor, act: Activation) -> Self::Tensor;
    /// `a + b`, element-wise (the residual connections).
    fn add(&mut self, a: &Self::Tensor, b: &Self::Tensor) -> Self::Tensor;
    /// `x * s`, element-wise (Gemma's embedding scale).
    fn scale(&mut self, x: &Self::Tensor, s: f32) -> Self::Tensor;
    /// `cap * tanh(x / cap)`, element-wise.
    fn softcap(&mut self, x: &Self::Tensor, cap: f32) -> Self::Tensor;
    /// Rows `range` of `x` (the last token's row before the LM head).
    fn rows(&mut self, x: &Self::Tensor, range: Range<usize>) -> Self::Tensor;

    /// Finish the step if needed and copy `x` to the host, row-major.
    fn read(&mut self, x: &Self::Tensor) -> Result<Vec<f32>>;

    /// Finish the step if needed and run it for what it stores in the cache, reading nothing
    /// back: a long prompt's leading chunks, which the next step follows on the device
    /// without the host waiting in between. `x` is the step's output (unread). The default
    /// reads `x` and drops it.
    fn run(&mut self, x: &Self::Tensor) -> Result<()> {
        self.read(x).map(drop)
    }

    /// Replays this sequence's last step once more with a GPU timestamp around every
    /// dispatch; `None` (the default): the executor has no device timer.
    fn profile_last_step(&mut self) -> Result<Option<StepProfile>> {
        Ok(None)
    }

    /// The largest top-k [`Sequence::sample`] implements; 0 (the default): the executor
    /// samples nowhere but on the host (callers read the logits and run the CPU sampler).
    fn device_top_k(&self) -> usize {
        0
    }

    /// Finish the step and draw the next token from the last row of `logits` where they are
    /// (only the id comes back), as `draw` describes. `None`: no logit is finite.
    fn sample(&mut self, logits: &Self::Tensor, draw: &DeviceDraw) -> Result<Option<u32>> {
        let _ = (logits, draw);
        Err(ModelError::Unsupported(
            "sampling on this backend's device".into(),
        ))
    }

    /// As [`Sequence::sample`], without waiting for the id: [`Sequence::take_token`] reads
    /// it, and [`Sequence::drawn_ids`] feeds it to the next step while it is still on the
    /// device, so that step can be queued first. The default draws at once.
    fn queue_sample(&mut self, logits: &Self::Tensor, draw: &DeviceDraw) -> Result<PendingToken> {
        Ok(PendingToken::Ready(self.sample(logits, draw)?))
    }

    /// How the sequence queues draws ([`QueueDepth`]); the default submits every draw at
    /// once.
    fn queue_depth(&self) -> QueueDepth {
        QueueDepth::default()
    }

    /// Submits the queued draws it holds now (a generator's first token, whose wait should
    /// not include the steps queued after it). The default holds none.
    fn submit_queued(&mut self) -> Result<()> {
        Ok(())
    }

    /// Drops the queued draws not yet submitted (a generator stopping ahead of them): their
    /// steps never run, and the next step reads the last token drawn before them. The
    /// default has none.
    fn drop_unsubmitted(&mut self) {}

    /// Waits for a drawn token. `None`: no logit was finite.
    fn take_token(&mut self, pending: PendingToken) -> Result<Option<u32>> {
        match pending {
            PendingToken::Ready(t) => Ok(t),
            PendingToken::Queued(_) => Err(ModelError::Unsupported(
                "tokens queued on another backend".into(),
            )),
        }
    }

    /// The ids of one token: the one `pending` draws, which must be the last draw queued.
    fn drawn_ids(&mut self, pending: &PendingToken) -> Result<Self::Ids> {
        match pending {
            PendingToken::Ready(Some(t)) => Ok(self.ids(&[*t])),
            PendingToken::Ready(None) => Err(SamplerError::NoFiniteLogits.into()),
            PendingToken::Queued(_) => Err(ModelError::Unsupported(
                "tokens queued on another backend".into(),
            )),
        }
    }
}

/// A next token being drawn ([`Sequence::queue_sample`]).
#[derive(Debug)]
pub enum PendingToken {
    /// Drawn already (on the host, or by a backend that does not queue); `None`: no logit
    /// was finite.
    Ready(Option<u32>),
    /// Still being drawn on the device.
    Queued(DeviceToken),
}

impl PendingToken {
    /// The step that draws it may still be running.
    pub fn is_queued(&self) -> bool {
        matches!(self, PendingToken::Queued(_))
    }
}

/// A token a GPU step draws: its place among its sequence's queued draws (the sequence
/// keeps the read of its id).
#[derive(Debug)]
pub struct DeviceToken {
    /// The sequence that queued it.
    pub(crate) owner: u64,
    pub(crate) seq: u64,
}
