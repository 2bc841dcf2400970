//! The GPU backend: the same graphs, recorded as wgpu dispatches (`rullama-kernels`).
//!
//! Ops do not run when the graph calls them: each appends a node to the step's recording
//! ([`ir`]) and returns a handle. [`Backend::read`] ends the step. Its node list (shapes,
//! parameters, weight and cache identities; never data) is the key of a cache of built
//! [`plan::Plan`]s: the first time a signature is seen, it is lowered to kernel ops, buffers
//! are taken from a pool and the `Step` (pipelines, one uniform arena, bind groups) is
//! built; every later step with the same signature (every decode step) creates no GPU
//! object: it writes the token ids and positions (small u32 buffers that the gather, RoPE
//! and attention read) and submits one encoder with one compute pass, then reads back only
//! the requested tensor, or, for [`Backend::sample`], only the 4-byte token id that the
//! sampling op (`rullama_kernels::ops::sample`) draws from the last row of logits.
//!
//! Matrices: one token runs the matvec kernel, a block of tokens (prefill) the tiled matmul,
//! on the tensor cores where the device has them ([`GpuOptions::tensor_cores`]).
//! Projections that read one input and share a format and width (q/k/v, gate/up) are
//! uploaded stacked and computed by one product ([`GpuOptions::stack_projections`]).
//! The KV cache is f16 by default, as llama.cpp's ([`GpuOptions::kv_dtype`]: f32 keeps the
//! CPU reference's exact arithmetic).

mod fuse;
mod ir;
mod memory;
mod plan;
mod weight;

use std::collections::VecDeque;
use std::ops::Range;
use std::sync::Arc;

use rullama_gguf::TensorView;
use rullama_kernels::RopeStyle as RopeMode;
use rullama_kernels::ops::glu::Activation as GpuActivation;
use rullama_kernels::ops::sample::{K_MAX, NO_TOKEN, Sampling};
use rullama_kernels::ops::unary::UnaryOp;
use rullama_kernels::{Dtype, Gpu, GpuError, GpuTensor, Kernel, ReadRing, Ticket};

use crate::backend::{
    Attention, AttentionInputs, Backend, DeviceToken, KvCacheSpec, LinearView, LinearWeights,
    PendingToken, RmsNorm, Rope,
};
use crate::config::{Activation, RopeStyle};
use crate::error::{ModelError, Result};
use crate::sampler::{DeviceDraw, SamplerError};
use ir::{AttnNode, IdsInput, Key, Node, Recording, RopeSpec};
use memory::LiveBytes;
use plan::{Freqs, Plan};

pub use ir::{GpuAct, GpuIds};
pub use memory::DeviceMemory;
pub use rullama_kernels::ops::kv::KvDtype;
pub use rullama_kernels::{KernelTime, StepProfile};
use weight::Widen;
pub use weight::{GpuKvCache, GpuWeightRef};

/// A GPU error as the model's error, saying what was being done.
pub(crate) fn gpu_err(context: impl Into<String>) -> impl FnOnce(GpuError) -> ModelError {
    move |source| ModelError::Gpu {
        context: context.into(),
        source: Box::new(source),
    }
}

/// Choices of the GPU backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GpuOptions {
    /// Element type of KV caches made from now on.
    pub kv_dtype: KvDtype,
    /// Built steps kept for replay (prefill shapes, decode, per cache); the least recently
    /// used goes first.
    pub max_plans: usize,
    /// Prompt blocks' matmuls on the tensor cores where the device has them
    /// (`Caps::coop_f16`): weights and activations are rounded to f16 there, products summed
    /// in f32, as llama.cpp's Vulkan backend does. `false` keeps f32 arithmetic throughout.
    pub tensor_cores: bool,
    /// Upload the projections that read one input (q, k, v; gate, up) as one stacked
    /// matrix where they share a format and width, so one matvec or matmul computes them
    /// (a decode step of a small model is bound by its number of dispatches). `false`
    /// uploads each alone (for comparisons: the logits are the same bit for bit). Applies
    /// to models loaded after it is set.
    pub stack_projections: bool,
    /// Stack projections of different formats where one format holds all their weights
    /// exactly (`rullama_quant::widen`: Q4_0 and Q5_0 rows go up as Q8_0 beside Q8_0 ones),
    /// so a Q4_K_M file's q and k in Q5_0 and its v in Q8_0 (llama.cpp gives the v of some
    /// layers more bits) are one product, not two chained dispatches. The widened rows read
    /// 34 bytes a block of 32 instead of 22 (Q5_0). `false` stacks only matrices of one
    /// format (for comparisons: the weights are the same values, their dot products summed
    /// in the Q8_0 kernel's order).
    pub widen_stacks: bool,
    /// Upload Q4_0 and Q5_0 matrices (and stacks) of at most this many bytes as Q8_0, every
    /// weight kept exactly (`rullama_quant::widen`), for the decode products: a small product
    /// is bound by its lanes' chain, not its bytes, and Q8_0's (two lanes a block of 32, its
    /// codes read as they are) is shorter than Q5_0's (one lane a block, its fifth bits
    /// spread in). On the H100 (docs/PERF.md, fifteenth session) every Q5_0 matrix as Q8_0
    /// took gemma-3-270m's decode step -5.5% and SmolLM2's -6.2%, but qwen2.5-0.5b's 12 MB
    /// gate|up ran slower (bandwidth counts there), so the default bound, 4 MiB, widens the
    /// small models' matrices (up to 1.8 MB) and no large model's. 0 keeps the file's formats.
    pub widen_below: usize,
    /// Decode matvecs read their input as two int8 digits of a per-block-of-32 scale
    /// (d = amax / 127; x' = d (q1 + q2 / 254), within d / 508 of x: about 16 bits) and
    /// multiply with packed integer dot products, where the weight's format has that kernel
    /// (`q8_supported`): fewer instructions per weight byte than f32 inputs. The copy that
    /// the products of one input share comes from the `residual_norm` that made the input,
    /// or else from one quantize dispatch. `false` (the default) keeps f32 inputs.
    pub q8_inputs: bool,
    /// Store K and V into the KV cache inside the q/k norm + RoPE op (`head_norm_rope_kv`)
    /// instead of a separate `kv_append` before each attention: one dispatch fewer a layer.
    /// `false` keeps the separate append (for comparisons: the logits are the same bit for
    /// bit).
    pub fold_kv_append: bool,
    /// In decode (one token), which of those q/k norm + RoPE ops (with their K/V store) go
    /// into the attention that reads q and k (`attention_rope`: every workgroup norms and
    /// rotates its q rows, the split holding the position stores k and v): one dispatch
    /// fewer a layer again where one does. Needs `fold_kv_append`. The ops kept apart run as
    /// `head_norm_rope_kv` + `attention` (the same arithmetic per element, except that the
    /// attention's hook in registers sums a normed head's squares in another order: the
    /// logits equal bit for bit on lavapipe without q/k norms, to rounding with them).
    pub fold_rope_attention: RopeAttention,
    /// Fold a decode step's residual add and RMSNorm into the product that reads the norm
    /// (`matvec/x_norm.wgsl`: each of its workgroups computes the normed input itself) where
    /// that product is small enough for the repeated reads to cost less than the dispatch
    /// they save (`fuse.rs`). `false` keeps the separate `residual_norm` (for comparisons:
    /// the same arithmetic per element, the sums of squares in another order).
    pub fold_norm: bool,
    /// In a decode step, a Llama-style residual op (`h += a`, then a norm) is done row by row
    /// by the product that makes `a` (the o or down projection: the kernels' residual
    /// epilogue, `matvec_residual`), and the products that read the norm take its z and
    /// partial sums as their input (`Input::Scaled`: each scales its row totals by the norm's
    /// 1 / rms), where their extra reads stay small (`fuse.rs`); it goes before `fold_norm`.
    /// `false` leaves those ops to `fold_norm` or the separate `residual_norm` (for
    /// comparisons: the same arithmetic per element, the sums of squares in another order).
    pub residual_rows: bool,
    /// In a decode step, the matvec over a stacked gate|up stores `act(gate) * up` (the
    /// matvec's GLU epilogue), so the down projection is a plain matvec: no `glu` dispatch,
    /// and no GLU recomputed by every workgroup of the down projection (`matvec_glu`).
    /// `false` keeps the GLU apart or in the down projection's input (for comparisons: the
    /// logits are the same bit for bit).
    pub glu_epilogue: bool,
    /// Sampling steps recorded into one submission (one compute pass): a step queued is held
    /// until that many are, then they go together, so a decode token pays a fraction of a
    /// submission's cost (on the H100 ~10 us between passes and ~12 between submissions;
    /// docs/PERF.md, sixteenth session). [`Backend::steps_per_submit`] tells a generator to
    /// keep twice as many draws queued, so the device always has the next submission behind
    /// the one read. A token then comes back with the others of its submission. 1 submits
    /// every step at once.
    pub steps_per_submit: usize,
}

impl Default for GpuOptions {
    fn default() -> Self {
        GpuOptions {
            kv_dtype: KvDtype::F16,
            max_plans: 8,
            tensor_cores: true,
            stack_projections: true,
            widen_stacks: true,
            widen_below: 4 << 20,
            q8_inputs: false,
            fold_kv_append: true,
            fold_rope_attention: RopeAttention::All,
            fold_norm: true,
            residual_rows: true,
            glu_epilogue: true,
            steps_per_submit: 4,
        }
    }
}

/// Which decode rope ops [`GpuOptions::fold_rope_attention`] folds into their attention.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RopeAttention {
    /// None.
    Off,
    /// Those without per-head q/k norms (Llama, Qwen 2).
    Unnormed,
    /// Every one, the q/k-normed too (Gemma): the default. Every one of the attention's
    /// workgroups norms and rotates its q heads and the k head in registers while its key
    /// range is found, and takes the token's own key from registers rather than waiting for
    /// its store (`attention/q_rope_lanes.wgsl`, where every rotation pair lies in a lane).
    /// Decode steps on the H100 (2026-11-26, docs/PERF.md, eleventh session) against
    /// `Unnormed` with the earlier hook: gemma-3-270m -6.0%, gemma3-4b -3.4%, SmolLM2-135M
    /// -4.2%, qwen2.5-0.5b -3.9%.
    All,
}

/// Counts for tests and reports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GpuStats {
    /// Steps submitted.
    pub steps: u64,
    /// Steps that had to be built (signature not cached).
    pub plans_built: u64,
    /// Dispatches of the last step.
    pub dispatches: usize,
    /// Activation buffers of the last step's plan.
    pub buffers: usize,
    /// Steps that sampled on the GPU and read back only the token id.
    pub device_samples: u64,
    /// Submissions of those steps (each one or several steps in one pass).
    pub sample_submissions: u64,
}

/// The GPU executor of the model graph.
#[derive(Debug)]
pub struct GpuBackend {
    gpu: Arc<Gpu>,
    options: GpuOptions,
    rec: Recording,
    /// Built steps with their keys, most recently used last.
    plans: Vec<(Key, Plan)>,
    freqs: Freqs,
    stats: GpuStats,
    /// Bytes of the weights loaded so far.
    weight_bytes: u64,
    /// Bytes of the KV caches alive now.
    kv_bytes: LiveBytes,
    /// The token slots sampling steps draw into in turn, one per step of a submission (a
    /// plan's copy `c` into slot `c`): steps fed `Backend::drawn_ids` read the one drawn
    /// last, and every step of a submission leaves its own token for the read-back.
    tokens: Vec<GpuTensor>,
    /// The slot holding the token drawn last: the next step runs its plan's copy
    /// `last_draw + 1`, which reads it there.
    last_draw: usize,
    /// Staging for the drawn ids, a few steps deep so reads overlap the next steps.
    reads: ReadRing,
    /// Sampling steps queued so far (the last one's token is in `tokens[last_draw]`).
    queued: u64,
    /// Sampling steps prepared but not yet submitted (fewer than `steps_per_submit`).
    held: Vec<Held>,
    /// The read tickets of submitted draws, by sequence number, oldest first.
    tickets: VecDeque<(u64, Ticket)>,
    /// Plans built so far (the next plan's id).
    plans_made: u64,
}

/// A sampling step waiting for the others of its submission.
#[derive(Debug, Clone, Copy)]
struct Held {
    plan: u64,
    copy: usize,
    seq: u64,
}

/// One token slot per step of a submission.
fn token_slots(gpu: &Gpu, steps_per_submit: usize) -> Vec<GpuTensor> {
    (0..steps_per_submit.max(1))
        .map(|_| GpuTensor::zeros(gpu, &[1], Dtype::U32))
        .collect()
}

/// Staging slots of the token read ring: the draws a generator keeps queued (two
/// submissions' worth), the ones being submitted, one spare.
fn read_slots(steps_per_submit: usize) -> usize {
    3 * steps_per_submit.max(1) + 1
}

impl GpuBackend {
    /// Opens the adapter named by `RULLAMA_ADAPTER`, or the best one.
    pub fn open() -> Result<GpuBackend, GpuError> {
        Ok(GpuBackend::new(Gpu::open()?))
    }

    pub fn new(gpu: Gpu) -> GpuBackend {
        GpuBackend::shared(Arc::new(gpu))
    }

    /// Which matrices [`GpuOptions`] uploads in a wider format.
    fn widen(&self) -> Widen {
        Widen {
            stacks: self.options.widen_stacks,
            below: self.options.widen_below,
        }
    }

    /// A backend on a device shared with others.
    pub fn shared(gpu: Arc<Gpu>) -> GpuBackend {
        let options = GpuOptions::default();
        GpuBackend {
            tokens: token_slots(&gpu, options.steps_per_submit),
            last_draw: 0,
            reads: ReadRing::new(&gpu, read_slots(options.steps_per_submit), 4),
            queued: 0,
            held: Vec::new(),
            tickets: VecDeque::new(),
            plans_made: 0,
            gpu,
            options,
            rec: Recording::new(1),
            plans: Vec::new(),
            freqs: Freqs::default(),
            stats: GpuStats::default(),
            weight_bytes: 0,
            kv_bytes: LiveBytes::default(),
        }
    }

    pub fn with_options(mut self, options: GpuOptions) -> GpuBackend {
        // Plans follow the options (and bind the token slots): built ones go.
        self.plans.clear();
        if options.steps_per_submit != self.options.steps_per_submit {
            self.tokens = token_slots(&self.gpu, options.steps_per_submit);
            self.last_draw = 0;
            self.reads = ReadRing::new(&self.gpu, read_slots(options.steps_per_submit), 4);
        }
        self.options = options;
        self
    }

    pub fn gpu(&self) -> &Arc<Gpu> {
        &self.gpu
    }

    pub fn stats(&self) -> GpuStats {
        self.stats
    }

    /// The kernel of each dispatch of the last step (which fusions the lowering applied).
    pub fn last_step_kernels(&self) -> Vec<Kernel> {
        self.plans
            .last()
            .map_or_else(Vec::new, |(_, p)| p.kernels())
    }

    /// Device memory held now: weights, live KV caches, built steps.
    pub fn memory(&self) -> DeviceMemory {
        DeviceMemory {
            weights: self.weight_bytes,
            kv_cache: self.kv_bytes.get(),
            scratch: self.plans.iter().map(|(_, p)| p.bytes()).sum::<u64>()
                + self.freqs.bytes()
                + self.tokens.iter().map(GpuTensor::bytes).sum::<u64>()
                + self.reads.total_bytes(),
        }
    }

    /// Records a failed shape check; `read` reports it.
    fn check(&mut self, ok: bool, what: impl FnOnce() -> String) {
        if !ok {
            self.rec.fail(what());
        }
    }

    fn unary(&mut self, x: &GpuAct, op: UnaryOp, value: f32) -> GpuAct {
        let x = self.rec.src(x);
        self.rec.push(Node::Unary { x, op, value }, x.rows, x.cols)
    }

    /// Ends the recording: the plan for its key (built if new, then the most recent of
    /// `plans`) and the step's ids.
    fn finish(&mut self, x: &GpuAct, sample: bool) -> Result<Vec<IdsInput>> {
        let next = Recording::new(self.rec.step + 1);
        let mut rec = std::mem::replace(&mut self.rec, next);
        let target = rec.src(x);
        if let Some(e) = rec.error.take() {
            return Err(ModelError::Backend(format!("gpu step: {e}")));
        }
        let (key, ids) = rec.into_key(target, sample);
        let plan = self.plan(key).map_err(gpu_err("building a step"))?;
        let (dispatches, buffers) = (plan.dispatches(), plan.buffers());
        self.stats.steps += 1;
        self.stats.dispatches = dispatches;
        self.stats.buffers = buffers;
        Ok(ids)
    }

    /// The plan `finish` left most recent.
    fn current(&mut self) -> &mut Plan {
        &mut self
            .plans
            .last_mut()
            .expect("finish() leaves the plan last")
            .1
    }

    /// Finds or builds the plan of `key`, moving it to the back (most recent).
    fn plan(&mut self, key: Key) -> Result<&mut Plan, GpuError> {
        match self.plans.iter().position(|(k, _)| *k == key) {
            Some(i) => {
                let entry = self.plans.remove(i);
                self.plans.push(entry);
            }
            None => {
                // The held steps' plans must stay cached until they are submitted.
                self.submit_held()?;
                self.plans_made += 1;
                let (gpu, options) = (&self.gpu, &self.options);
                let plan = Plan::build(
                    gpu,
                    self.plans_made,
                    &key,
                    &mut self.freqs,
                    &self.tokens,
                    options,
                )?;
                self.stats.plans_built += 1;
                if self.plans.len() >= self.options.max_plans.max(1) {
                    self.plans.remove(0);
                }
                self.plans.push((key, plan));
            }
        }
        Ok(&mut self.plans.last_mut().expect("just pushed").1)
    }

    /// The copy of a plan the next step runs: the one that reads the token drawn last.
    fn next_copy(&self) -> usize {
        (self.last_draw + 1) % self.tokens.len()
    }

    /// Submits the held sampling steps, in order, as one pass.
    fn submit_held(&mut self) -> Result<(), GpuError> {
        if self.held.is_empty() {
            return Ok(());
        }
        let held = std::mem::take(&mut self.held);
        let steps: Vec<_> = held
            .iter()
            .map(|h| {
                let (_, plan) = self
                    .plans
                    .iter()
                    .find(|(_, p)| p.id == h.plan)
                    .expect("a held step's plan stays cached until it is submitted");
                (plan.step(h.copy), &self.tokens[h.copy])
            })
            .collect();
        let tickets = self.reads.submit(&self.gpu, &steps)?;
        self.stats.sample_submissions += 1;
        self.tickets.extend(held.iter().map(|h| h.seq).zip(tickets));
        // Tickets older than the ring are dead (their slots were reused): never read.
        let live = read_slots(self.options.steps_per_submit);
        while self.tickets.len() > live {
            self.tickets.pop_front();
        }
        Ok(())
    }
}

fn activation(a: Activation) -> GpuActivation {
    match a {
        Activation::GeluTanh => GpuActivation::GeluTanh,
        Activation::Silu => GpuActivation::Silu,
    }
}

fn rope_mode(s: RopeStyle) -> RopeMode {
    match s {
        RopeStyle::Normal => RopeMode::Normal,
        RopeStyle::Neox => RopeMode::Neox,
    }
}

impl Backend for GpuBackend {
    type Weight = GpuWeightRef;
    type Tensor = GpuAct;
    type Ids = GpuIds;
    type KvCache = GpuKvCache;

    fn load_weight(&mut self, view: TensorView<'_>) -> Result<GpuWeightRef> {
        let w = GpuWeightRef::load(&self.gpu, view, self.widen())?;
        self.weight_bytes += w.bytes();
        Ok(w)
    }

    /// Runs of consecutive linears whose matrices share a format and width go up as one
    /// stacked matrix (and stacked biases); the others one tensor at a time.
    fn load_linears(
        &mut self,
        linears: &[LinearView<'_>],
    ) -> Result<Vec<LinearWeights<GpuWeightRef>>> {
        let mut out = Vec::with_capacity(linears.len());
        let widen = self.widen();
        let views: Vec<TensorView<'_>> = linears.iter().map(|l| l.weight).collect();
        let mut i = 0;
        while i < linears.len() {
            let mut n = 1;
            while self.options.stack_projections
                && i + n < linears.len()
                && GpuWeightRef::stack_shape(&views[i..=i + n], widen).is_some()
            {
                n += 1;
            }
            let run = &linears[i..i + n];
            let loaded = if n == 1 {
                let l = run[0];
                let weight = GpuWeightRef::load(&self.gpu, l.weight, widen)?;
                let bias = l
                    .bias
                    .map(|b| GpuWeightRef::load(&self.gpu, b, widen))
                    .transpose()?;
                vec![(weight, bias)]
            } else {
                GpuWeightRef::load_stack(&self.gpu, run, widen)?
            };
            // A stack's matrix (and bias) is counted once, at its first handle.
            let mut seen: Vec<&GpuWeightRef> = Vec::new();
            for w in loaded.iter().flat_map(|(w, b)| std::iter::once(w).chain(b)) {
                if !seen.iter().any(|s| s.shares(w)) {
                    self.weight_bytes += w.bytes();
                    seen.push(w);
                }
            }
            out.extend(loaded);
            i += n;
        }
        Ok(out)
    }

    fn new_kv_cache(&mut self, spec: &KvCacheSpec) -> Result<GpuKvCache> {
        GpuKvCache::new(&self.gpu, spec, self.options.kv_dtype, &self.kv_bytes)
    }

    fn ids(&mut self, ids: &[u32]) -> GpuIds {
        self.rec.push_ids(IdsInput::Host(ids.to_vec()), ids.len())
    }

    fn embed(&mut self, table: &GpuWeightRef, ids: &GpuIds) -> GpuAct {
        let slot = self.rec.slot(ids);
        let d = table.matrix().map_or(0, |w| w.shape.n_in);
        self.check(d > 0, || "embed: the table is not a matrix".into());
        let node = Node::Embed {
            table: table.clone(),
            ids: slot,
            n: ids.n,
        };
        self.rec.push(node, ids.n, d)
    }

    fn matmul(&mut self, w: &GpuWeightRef, x: &GpuAct) -> GpuAct {
        let x = self.rec.src(x);
        let shape = w.matrix().map(|m| m.shape);
        let n_out = w.matrix_rows().map_or(0, |r| r.n);
        self.check(shape.is_some_and(|s| s.n_in == x.cols), || {
            format!("matmul: weight {shape:?} with input of {} columns", x.cols)
        });
        let node = Node::Matmul { w: w.clone(), x };
        self.rec.push(node, x.rows, n_out)
    }

    fn add_bias(&mut self, x: &GpuAct, bias: &GpuWeightRef) -> GpuAct {
        let x = self.rec.src(x);
        let n = bias.vector().map(|_| bias.len());
        self.check(n == Some(x.cols), || {
            format!("add_bias: bias of {n:?} on {} columns", x.cols)
        });
        let node = Node::AddBias {
            x,
            bias: bias.clone(),
        };
        self.rec.push(node, x.rows, x.cols)
    }

    fn rms_norm(&mut self, x: &GpuAct, p: &RmsNorm<'_, GpuWeightRef>) -> GpuAct {
        let x = self.rec.src(x);
        let ok = p.group > 0 && x.cols.is_multiple_of(p.group);
        let w_ok = p
            .weight
            .is_none_or(|w| w.vector().map(|_| w.len()) == Some(p.group));
        self.check(ok && w_ok, || {
            format!("rms_norm: group {} over {} columns", p.group, x.cols)
        });
        let node = Node::RmsNorm {
            x,
            weight: p.weight.cloned(),
            eps: p.eps,
            group: p.group,
        };
        self.rec.push(node, x.rows, x.cols)
    }

    fn rope(&mut self, x: &GpuAct, positions: &GpuIds, p: &Rope) -> GpuAct {
        let x = self.rec.src(x);
        let pos = self.rec.slot(positions);
        let ok = positions.n == x.rows && p.head_dim > 0 && x.cols.is_multiple_of(p.head_dim);
        self.check(ok, || {
            format!(
                "rope: {} positions, head dim {} for [{}, {}]",
                positions.n, p.head_dim, x.rows, x.cols
            )
        });
        let spec = RopeSpec {
            mode: rope_mode(p.style),
            head_dim: p.head_dim,
            n_rot: p.n_rot,
            base: p.base,
            freq_scale: p.freq_scale,
        };
        self.rec.push(Node::Rope { x, pos, spec }, x.rows, x.cols)
    }

    fn attention(
        &mut self,
        cache: &mut GpuKvCache,
        x: AttentionInputs<'_, GpuAct, GpuIds>,
        p: &Attention,
    ) -> GpuAct {
        let (q, k, v) = (self.rec.src(x.q), self.rec.src(x.k), self.rec.src(x.v));
        let pos = self.rec.slot(x.positions);
        let kv = cache.layer(p.layer);
        self.check(kv.is_some(), || {
            format!("attention: no cache layer {}", p.layer)
        });
        let shapes_ok = q.cols == p.n_head * p.head_dim_k
            && k.cols == p.n_head_kv * p.head_dim_k
            && v.cols == p.n_head_kv * p.head_dim_v
            && q.rows == k.rows
            && k.rows == v.rows
            && x.positions.n == q.rows;
        self.check(shapes_ok, || {
            format!("attention: shapes q {q:?} k {k:?} v {v:?}")
        });
        let out_cols = p.n_head * p.head_dim_v;
        let Some(kv) = kv else {
            // Never lowered: `read` reports the error recorded above.
            return self.rec.push(Node::Add { a: q, b: q }, q.rows, out_cols);
        };
        let node = AttnNode {
            kv,
            q,
            k,
            v,
            pos,
            n_head: p.n_head,
            scale: p.scale,
            window: p.window.unwrap_or(0),
            softcap: p.softcap.unwrap_or(0.0),
        };
        self.rec
            .push(Node::Attention(Box::new(node)), q.rows, out_cols)
    }

    fn glu(&mut self, gate: &GpuAct, up: &GpuAct, act: Activation) -> GpuAct {
        let (gate, up) = (self.rec.src(gate), self.rec.src(up));
        self.check((gate.rows, gate.cols) == (up.rows, up.cols), || {
            format!("glu: gate {gate:?} up {up:?}")
        });
        let node = Node::Glu {
            gate,
            up,
            act: activation(act),
        };
        self.rec.push(node, gate.rows, gate.cols)
    }

    fn add(&mut self, a: &GpuAct, b: &GpuAct) -> GpuAct {
        let (a, b) = (self.rec.src(a), self.rec.src(b));
        self.check((a.rows, a.cols) == (b.rows, b.cols), || {
            format!("add: {a:?} + {b:?}")
        });
        self.rec.push(Node::Add { a, b }, a.rows, a.cols)
    }

    fn scale(&mut self, x: &GpuAct, s: f32) -> GpuAct {
        self.unary(x, UnaryOp::Scale, s)
    }

    fn softcap(&mut self, x: &GpuAct, cap: f32) -> GpuAct {
        self.unary(x, UnaryOp::SoftCap, cap)
    }

    fn rows(&mut self, x: &GpuAct, range: Range<usize>) -> GpuAct {
        let mut src = self.rec.src(x);
        self.check(range.start < range.end && range.end <= src.rows, || {
            format!("rows {range:?} of {} rows", src.rows)
        });
        src.row0 += range.start;
        src.rows = range.len();
        GpuAct {
            step: self.rec.step,
            src,
        }
    }

    fn read(&mut self, x: &GpuAct) -> Result<Vec<f32>> {
        let ids = self.finish(x, false)?;
        self.submit_queued()?;
        let gpu = Arc::clone(&self.gpu);
        let copy = self.next_copy();
        self.current()
            .run(&gpu, copy, &ids)
            .map_err(gpu_err("running a step"))
    }

    fn device_top_k(&self) -> usize {
        K_MAX
    }

    fn profile_last_step(&mut self) -> Result<Option<StepProfile>> {
        self.submit_queued()?;
        let copy = self.last_draw;
        let Some((_, plan)) = self.plans.last_mut() else {
            return Ok(None);
        };
        let profile = plan
            .profile(&self.gpu, copy)
            .map_err(gpu_err("profiling a step"))?;
        Ok(Some(profile))
    }

    fn device_memory(&self) -> Option<DeviceMemory> {
        Some(self.memory())
    }

    fn sample(&mut self, logits: &GpuAct, draw: &DeviceDraw) -> Result<Option<u32>> {
        let pending = self.queue_sample(logits, draw)?;
        self.take_token(pending)
    }

    fn queue_sample(&mut self, logits: &GpuAct, draw: &DeviceDraw) -> Result<PendingToken> {
        let s = Sampling {
            top_k: draw.top_k,
            top_p: draw.top_p,
            min_p: draw.min_p,
            min_keep: draw.min_keep,
            temperature: draw.temperature,
        };
        let ids = self.finish(logits, true)?;
        let copy = self.next_copy();
        // A copy's buffers hold one step's inputs, and a slot one draw until it is read
        // back: a second step of the same copy (or slot) waits for a submit.
        if self.held.iter().any(|h| h.copy == copy) {
            self.submit_queued()?;
        }
        let gpu = Arc::clone(&self.gpu);
        let plan = self.current();
        plan.prepare_sample(&gpu, copy, &ids, &s, draw.u)
            .map_err(gpu_err("preparing a sampling step"))?;
        let id = plan.id;
        self.last_draw = copy;
        self.queued += 1;
        self.held.push(Held {
            plan: id,
            copy,
            seq: self.queued,
        });
        if self.held.len() >= self.steps_per_submit() {
            self.submit_queued()?;
        }
        self.stats.device_samples += 1;
        Ok(PendingToken::Queued(DeviceToken { seq: self.queued }))
    }

    fn take_token(&mut self, pending: PendingToken) -> Result<Option<u32>> {
        match pending {
            PendingToken::Ready(t) => Ok(t),
            PendingToken::Queued(d) => {
                if self.held.iter().any(|h| h.seq == d.seq) {
                    self.submit_queued()?;
                }
                let at = self.tickets.iter().position(|(seq, _)| *seq == d.seq);
                let Some((_, ticket)) = at.and_then(|i| self.tickets.remove(i)) else {
                    return Err(ModelError::Backend(
                        "a drawn token read twice, or after its step was dropped".into(),
                    ));
                };
                let mut id = [0u32];
                self.reads
                    .read(&self.gpu, ticket, &mut id)
                    .map_err(gpu_err("reading a drawn token"))?;
                Ok((id[0] != NO_TOKEN).then_some(id[0]))
            }
        }
    }

    fn steps_per_submit(&self) -> usize {
        self.options.steps_per_submit.max(1)
    }

    fn submit_queued(&mut self) -> Result<()> {
        self.submit_held()
            .map_err(gpu_err("submitting sampling steps"))
    }

    fn drop_unsubmitted(&mut self) {
        if let Some(first) = self.held.first() {
            self.last_draw = (first.copy + self.tokens.len() - 1) % self.tokens.len();
        }
        self.held.clear();
    }

    fn drawn_ids(&mut self, pending: &PendingToken) -> Result<GpuIds> {
        match pending {
            PendingToken::Ready(Some(t)) => Ok(self.ids(&[*t])),
            PendingToken::Ready(None) => Err(SamplerError::NoFiniteLogits.into()),
            PendingToken::Queued(d) if d.seq == self.queued => {
                Ok(self.rec.push_ids(IdsInput::Drawn, 1))
            }
            PendingToken::Queued(_) => Err(ModelError::Backend(
                "a drawn token fed after a later draw overwrote it on the device".into(),
            )),
        }
    }
}
