//! The GPU executor: the same graphs, recorded as wgpu dispatches (`rullama-kernels`).
//!
//! [`GpuBackend`] is the device side, shared by every sequence of a model: the weights, the
//! built plans (a cache keyed by step signature: shapes, parameters and weight identities;
//! never data, never which sequence) with their buffer pool, the RoPE tables. A
//! [`GpuSequence`] is one sequence's side: its KV cache, its token slots and queued draws
//! (`queue.rs`), and its bindings of the plans it ran to those buffers (`plan.rs`: `Binding`).
//!
//! Ops do not run when the graph calls them: each appends a node to the sequence's
//! recording (`ir.rs`) and returns a handle. [`Sequence::read`](crate::Sequence::read) ends
//! the step. The first time a signature is seen it is lowered to kernel ops, and the first
//! time a sequence runs a plan the plan is bound to the sequence's buffers (pipelines,
//! uniform arenas, bind groups); every later step with the same signature (every decode
//! step) creates no GPU object: it writes the token ids and positions (small u32 buffers that
//! the gather, RoPE and attention read) and submits one encoder with one compute pass, then
//! reads back only the requested tensor, or, for
//! [`Sequence::sample`](crate::Sequence::sample), only the 4-byte token id that the sampling
//! op (`rullama_kernels::ops::sample`) draws from the last row of logits.
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
mod queue;
mod sequence;
mod weight;

use std::sync::{Arc, Mutex, MutexGuard};

use rullama_gguf::TensorView;
use rullama_kernels::{Gpu, GpuError, Kernel};

use crate::backend::{Backend, KvCacheSpec, LinearView, LinearWeights, QueueDepth};
use crate::error::{ModelError, Result};
use crate::memory::DeviceMemory;
use ir::Key;
use memory::LiveBytes;
use plan::{Freqs, Plan};

pub use ir::{GpuAct, GpuIds};
pub use rullama_kernels::ops::kv::KvDtype;
pub use sequence::GpuSequence;
pub use weight::GpuWeightRef;
use weight::{GpuKvCache, Widen};

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
    /// Plans kept for replay (prefill shapes, decode), and plan bindings each sequence
    /// keeps; the least recently used goes first.
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
    /// spread in). A large matrix is bound by its bytes instead (qwen2.5-0.5b's 12 MB gate|up
    /// ran slower widened), so the default bound, 4 MiB, widens the small models' matrices (up
    /// to 1.8 MB) and no large model's (docs/PERF.md, D-widen-below). 0 keeps the file's
    /// formats.
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
    /// submission's cost (docs/PERF.md, D-steps-per-submit). A generator keeps twice as many
    /// draws queued, so the device always has the next submission behind the one read; the
    /// queue's depths all follow from this one number ([`QueueDepth`]). A token then comes
    /// back with the others of its submission. 1 submits every step at once.
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
    /// its store (`attention/q_rope_lanes.wgsl`, where every rotation pair lies in a lane):
    /// docs/PERF.md, D-rope-in-attention.
    All,
}

/// Counts for tests and reports, over every sequence of a backend.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GpuStats {
    /// Steps submitted.
    pub steps: u64,
    /// Steps whose plan had to be built (signature not cached).
    pub plans_built: u64,
    /// Plans bound to a sequence's buffers (a sequence's first step of a signature).
    pub bindings_built: u64,
    /// Dispatches of the last step.
    pub dispatches: usize,
    /// Activation buffers of the last step's plan.
    pub buffers: usize,
    /// Steps that sampled on the GPU and read back only the token id.
    pub device_samples: u64,
    /// Submissions of those steps (each one or several steps in one pass).
    pub sample_submissions: u64,
}

/// The GPU executor's device side, shared by the sequences of a model.
#[derive(Debug)]
pub struct GpuBackend {
    shared: Arc<Shared>,
    /// Bytes of the weights loaded so far.
    weight_bytes: u64,
}

/// What the sequences of one backend share.
#[derive(Debug)]
pub(crate) struct Shared {
    pub gpu: Arc<Gpu>,
    pub options: GpuOptions,
    plans: Mutex<PlanCache>,
    stats: Mutex<GpuStats>,
    /// The plan run last (by any sequence), for [`GpuBackend::last_step_kernels`].
    last: Mutex<Option<Arc<Plan>>>,
    kv_bytes: LiveBytes,
    plan_bytes: LiveBytes,
    /// What sequences hold besides their caches: token slots, id staging, plan bindings.
    seq_bytes: LiveBytes,
}

/// Built plans, most recently used last, and the RoPE tables they read.
#[derive(Debug, Default)]
struct PlanCache {
    plans: Vec<Arc<Plan>>,
    freqs: Freqs,
}

/// Locks `m`; a panic of another holder leaves data that is still consistent (plain
/// caches and counters), so a poisoned lock is taken as it is.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Shared {
    fn new(gpu: Arc<Gpu>, options: GpuOptions, counters: [LiveBytes; 3]) -> Shared {
        let [kv_bytes, plan_bytes, seq_bytes] = counters;
        Shared {
            gpu,
            options,
            plans: Mutex::default(),
            stats: Mutex::default(),
            last: Mutex::default(),
            kv_bytes,
            plan_bytes,
            seq_bytes,
        }
    }

    /// How deep every sequence's queue of draws runs.
    pub fn depth(&self) -> QueueDepth {
        QueueDepth::new(self.options.steps_per_submit)
    }

    /// The plan of `key`, built if new (the least recently used one goes when the cache is
    /// full: sequences bound to it keep it alive until they let it go).
    pub fn plan(&self, key: Key) -> Result<Arc<Plan>, GpuError> {
        let mut cache = lock(&self.plans);
        let plan = match cache.plans.iter().position(|p| p.key == key) {
            Some(i) => {
                let plan = cache.plans.remove(i);
                cache.plans.push(Arc::clone(&plan));
                plan
            }
            None => {
                let copies = self.depth().steps_per_submit();
                let freqs = &mut cache.freqs;
                let plan = Arc::new(Plan::build(
                    &self.gpu,
                    key,
                    freqs,
                    copies,
                    &self.options,
                    &self.plan_bytes,
                )?);
                lock(&self.stats).plans_built += 1;
                if cache.plans.len() >= self.options.max_plans.max(1) {
                    cache.plans.remove(0);
                }
                cache.plans.push(Arc::clone(&plan));
                plan
            }
        };
        Ok(plan)
    }

    /// Counts a step of `plan` about to run.
    pub fn count_step(&self, plan: &Arc<Plan>) {
        let mut stats = lock(&self.stats);
        stats.steps += 1;
        stats.dispatches = plan.dispatches();
        stats.buffers = plan.buffers();
        drop(stats);
        let mut last = lock(&self.last);
        if !last.as_ref().is_some_and(|l| Arc::ptr_eq(l, plan)) {
            *last = Some(Arc::clone(plan));
        }
    }

    /// Updates the counters.
    pub fn stats(&self, f: impl FnOnce(&mut GpuStats)) {
        f(&mut lock(&self.stats));
    }

    pub fn seq_bytes(&self) -> &LiveBytes {
        &self.seq_bytes
    }
}

impl GpuBackend {
    /// Opens the adapter named by `RULLAMA_ADAPTER`, or the best one.
    pub fn open() -> Result<GpuBackend, GpuError> {
        Ok(GpuBackend::new(Gpu::open()?))
    }

    /// A backend on `gpu`, with the default options.
    pub fn new(gpu: Gpu) -> GpuBackend {
        GpuBackend::shared(Arc::new(gpu))
    }

    /// A backend on a device shared with others.
    pub fn shared(gpu: Arc<Gpu>) -> GpuBackend {
        let counters = Default::default();
        GpuBackend {
            shared: Arc::new(Shared::new(gpu, GpuOptions::default(), counters)),
            weight_bytes: 0,
        }
    }

    /// The same device with other options. Plans follow the options: built ones go (a
    /// sequence made before keeps the options it was made with).
    pub fn with_options(self, options: GpuOptions) -> GpuBackend {
        let s = &self.shared;
        let counters = [
            s.kv_bytes.clone(),
            s.plan_bytes.clone(),
            s.seq_bytes.clone(),
        ];
        GpuBackend {
            shared: Arc::new(Shared::new(Arc::clone(&s.gpu), options, counters)),
            weight_bytes: self.weight_bytes,
        }
    }

    /// The options its plans are built with.
    pub fn options(&self) -> &GpuOptions {
        &self.shared.options
    }

    /// The device it runs on.
    pub fn gpu(&self) -> &Arc<Gpu> {
        &self.shared.gpu
    }

    /// Counts of every sequence's steps so far.
    pub fn stats(&self) -> GpuStats {
        *lock(&self.shared.stats)
    }

    /// The kernel of each dispatch of the last step any sequence ran (which fusions the
    /// lowering applied).
    pub fn last_step_kernels(&self) -> Vec<Kernel> {
        lock(&self.shared.last)
            .as_ref()
            .map_or_else(Vec::new, |p| p.kernels().to_vec())
    }

    /// Device memory held now: weights, live sequences' KV caches, plans and what sequences
    /// hold to run them.
    pub fn memory(&self) -> DeviceMemory {
        let s = &self.shared;
        DeviceMemory {
            weights: self.weight_bytes,
            kv_cache: s.kv_bytes.get(),
            scratch: s.plan_bytes.get() + lock(&s.plans).freqs.bytes() + s.seq_bytes.get(),
        }
    }

    /// Which matrices [`GpuOptions`] uploads in a wider format.
    fn widen(&self) -> Widen {
        Widen {
            stacks: self.shared.options.widen_stacks,
            below: self.shared.options.widen_below,
        }
    }
}

impl Backend for GpuBackend {
    type Weight = GpuWeightRef;
    type Sequence = GpuSequence;

    fn load_weight(&mut self, view: TensorView<'_>) -> Result<GpuWeightRef> {
        let w = GpuWeightRef::load(&self.shared.gpu, view, self.widen())?;
        self.weight_bytes += w.bytes();
        Ok(w)
    }

    /// Runs of consecutive linears whose matrices share a format and width go up as one
    /// stacked matrix (and stacked biases); the others one tensor at a time.
    fn load_linears(
        &mut self,
        linears: &[LinearView<'_>],
    ) -> Result<Vec<LinearWeights<GpuWeightRef>>> {
        let gpu = Arc::clone(&self.shared.gpu);
        let mut out = Vec::with_capacity(linears.len());
        let widen = self.widen();
        let views: Vec<TensorView<'_>> = linears.iter().map(|l| l.weight).collect();
        let mut i = 0;
        while i < linears.len() {
            let mut n = 1;
            while self.shared.options.stack_projections
                && i + n < linears.len()
                && GpuWeightRef::stack_shape(&views[i..=i + n], widen).is_some()
            {
                n += 1;
            }
            let run = &linears[i..i + n];
            let loaded = if n == 1 {
                let l = run[0];
                let weight = GpuWeightRef::load(&gpu, l.weight, widen)?;
                let bias = l
                    .bias
                    .map(|b| GpuWeightRef::load(&gpu, b, widen))
                    .transpose()?;
                vec![(weight, bias)]
            } else {
                GpuWeightRef::load_stack(&gpu, run, widen)?
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

    fn new_sequence(&self, spec: &KvCacheSpec) -> Result<GpuSequence> {
        let s = &self.shared;
        let cache = GpuKvCache::new(&s.gpu, spec, s.options.kv_dtype, &s.kv_bytes)?;
        Ok(GpuSequence::new(Arc::clone(&self.shared), cache))
    }

    /// An activation is one buffer bound whole to the kernels that read it.
    fn max_activation_bytes(&self) -> Option<u64> {
        Some(self.shared.gpu.max_binding_bytes())
    }

    fn device_memory(&self) -> Option<DeviceMemory> {
        Some(self.memory())
    }
}
