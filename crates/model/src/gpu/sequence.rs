//! One sequence on the GPU executor: its KV cache, its recording of the current step, its
//! queue of draws ([`super::queue`]) and its bindings of the shared plans to its buffers.

use std::ops::Range;
use std::sync::Arc;

use rullama_kernels::ops::sample::{K_MAX, NO_TOKEN, Sampling};
use rullama_kernels::ops::unary::UnaryOp;
use rullama_kernels::{GpuError, StepProfile};

use super::ir::{AttnNode, GpuAct, GpuIds, IdsInput, Node, Recording, RopeSpec};
use super::plan::{Binding, SeqBuffers};
use super::queue::{DrawQueue, Held};
use super::weight::{GpuKvCache, GpuWeightRef, next_id};
use super::{Shared, gpu_err};
use crate::backend::{
    AttentionInputs, AttentionParams, DeviceToken, PendingToken, QueueDepth, RmsNormParams,
    RopeParams, Sequence,
};
use crate::config::Activation;
use crate::error::{ModelError, Result};
use crate::sampler::{DeviceDraw, SamplerError};

/// A sequence on a [`super::GpuBackend`].
#[derive(Debug)]
pub struct GpuSequence {
    /// Tells the sequence's queued tokens from another's.
    id: u64,
    shared: Arc<Shared>,
    cache: GpuKvCache,
    rec: Recording,
    queue: DrawQueue,
    /// The plans this sequence ran, bound to its buffers; most recently used last.
    bindings: Vec<Binding>,
}

impl GpuSequence {
    pub(crate) fn new(shared: Arc<Shared>, cache: GpuKvCache) -> GpuSequence {
        let queue = DrawQueue::new(&shared.gpu, shared.depth(), shared.seq_bytes());
        GpuSequence {
            id: next_id(),
            shared,
            cache,
            rec: Recording::new(1),
            queue,
            bindings: Vec::new(),
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

    /// Ends the recording: the binding of its plan (built if new, then the most recent of
    /// `bindings`) and the step's ids.
    fn finish(&mut self, x: &GpuAct, sample: bool) -> Result<Vec<IdsInput>> {
        let next = Recording::new(self.rec.step + 1);
        let mut rec = std::mem::replace(&mut self.rec, next);
        let target = rec.src(x);
        if let Some(e) = rec.error.take() {
            return Err(ModelError::Backend(format!("gpu step: {e}")));
        }
        let (key, ids) = rec.into_key(target, sample);
        let plan = self.shared.plan(key).map_err(gpu_err("building a step"))?;
        match self.bindings.iter().position(|b| b.plan.id == plan.id) {
            Some(i) => {
                let b = self.bindings.remove(i);
                self.bindings.push(b);
            }
            None => {
                // Held steps run bindings that may go now: they are submitted first.
                self.submit_held()
                    .map_err(gpu_err("submitting sampling steps"))?;
                // A binding of an older plan of the same signature (evicted from the
                // shared cache since) is not used again.
                self.bindings.retain(|b| b.plan.key != plan.key);
                if self.bindings.len() >= self.shared.options.max_plans.max(1) {
                    self.bindings.remove(0);
                }
                let bufs = SeqBuffers {
                    cache: &self.cache,
                    tokens: &self.queue.tokens,
                };
                let binding = plan
                    .bind(&self.shared.gpu, bufs, self.shared.seq_bytes())
                    .map_err(gpu_err("binding a step to a sequence"))?;
                self.shared.stats(|s| s.bindings_built += 1);
                self.bindings.push(binding);
            }
        }
        self.shared.count_step(&plan);
        Ok(ids)
    }

    /// Finishes the step that ends at `x` without a draw (its binding then last) and submits
    /// what is queued before it: the step's ids and the copy of it to run (`read`, `run`).
    fn finish_unsampled(&mut self, x: &GpuAct) -> Result<(Vec<IdsInput>, usize)> {
        let ids = self.finish(x, false)?;
        self.submit_queued()?;
        Ok((ids, self.queue.next_copy()))
    }

    /// The binding `finish` left most recent.
    fn current(&mut self) -> &mut Binding {
        self.bindings
            .last_mut()
            .expect("finish() leaves the binding last")
    }

    /// Submits the held sampling steps, in order, as one pass.
    fn submit_held(&mut self) -> Result<(), GpuError> {
        if self.queue.held.is_empty() {
            return Ok(());
        }
        let held = std::mem::take(&mut self.queue.held);
        let steps: Vec<_> = held
            .iter()
            .map(|h| {
                let binding = self
                    .bindings
                    .iter()
                    .find(|b| b.plan.id == h.plan)
                    .expect("a held step's binding stays until it is submitted");
                (binding.step(h.copy), &self.queue.tokens[h.copy])
            })
            .collect();
        let tickets = self.queue.reads.submit(&self.shared.gpu, &steps)?;
        self.shared.stats(|s| s.sample_submissions += 1);
        self.queue.submitted(&held, tickets);
        Ok(())
    }
}

impl Sequence for GpuSequence {
    type Weight = GpuWeightRef;
    type Tensor = GpuAct;
    type Ids = GpuIds;

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

    fn rms_norm(&mut self, x: &GpuAct, p: &RmsNormParams<'_, GpuWeightRef>) -> GpuAct {
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

    fn rope(&mut self, x: &GpuAct, positions: &GpuIds, p: &RopeParams) -> GpuAct {
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
            style: p.style,
            head_dim: p.head_dim,
            n_rot: p.n_rot,
            base: p.base,
            freq_scale: p.freq_scale,
        };
        self.rec.push(Node::Rope { x, pos, spec }, x.rows, x.cols)
    }

    fn attention(&mut self, x: AttentionInputs<'_, GpuAct, GpuIds>, p: &AttentionParams) -> GpuAct {
        let (q, k, v) = (self.rec.src(x.q), self.rec.src(x.k), self.rec.src(x.v));
        let pos = self.rec.slot(x.positions);
        let kv = self.cache.slot(p.layer);
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
        let node = Node::Glu { gate, up, act };
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
        let (ids, copy) = self.finish_unsampled(x)?;
        let gpu = Arc::clone(&self.shared.gpu);
        let binding = self.current();
        let plan = Arc::clone(&binding.plan);
        plan.run(&gpu, binding, copy, &ids)
            .map_err(gpu_err("running a step"))
    }

    /// As `read`, without the read: the step is submitted and the host goes on at once (the
    /// device runs the next step after it, in submission order).
    fn run(&mut self, x: &GpuAct) -> Result<()> {
        let (ids, copy) = self.finish_unsampled(x)?;
        let gpu = Arc::clone(&self.shared.gpu);
        let binding = self.current();
        let plan = Arc::clone(&binding.plan);
        plan.submit(&gpu, binding, copy, &ids);
        Ok(())
    }

    fn device_top_k(&self) -> usize {
        K_MAX
    }

    fn profile_last_step(&mut self) -> Result<Option<StepProfile>> {
        self.submit_queued()?;
        let copy = self.queue.last_draw;
        let gpu = Arc::clone(&self.shared.gpu);
        let Some(binding) = self.bindings.last_mut() else {
            return Ok(None);
        };
        let profile = binding
            .profile(&gpu, copy)
            .map_err(gpu_err("profiling a step"))?;
        Ok(Some(profile))
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
        let copy = self.queue.next_copy();
        // A copy's buffers hold one step's inputs, and a slot one draw until it is read
        // back: a second step of the same copy (or slot) waits for a submit.
        if self.queue.held.iter().any(|h| h.copy == copy) {
            self.submit_queued()?;
        }
        let gpu = Arc::clone(&self.shared.gpu);
        let binding = self.current();
        let plan = Arc::clone(&binding.plan);
        plan.prepare_sample(&gpu, binding, copy, &ids, &s, draw.u)
            .map_err(gpu_err("preparing a sampling step"))?;
        let q = &mut self.queue;
        q.last_draw = copy;
        q.queued += 1;
        let seq = q.queued;
        q.held.push(Held {
            plan: plan.id,
            copy,
            seq,
        });
        if q.held.len() >= q.depth.steps_per_submit() {
            self.submit_queued()?;
        }
        self.shared.stats(|s| s.device_samples += 1);
        Ok(PendingToken::Queued(DeviceToken {
            owner: self.id,
            seq,
        }))
    }

    fn take_token(&mut self, pending: PendingToken) -> Result<Option<u32>> {
        let d = match pending {
            PendingToken::Ready(t) => return Ok(t),
            PendingToken::Queued(d) if d.owner == self.id => d,
            PendingToken::Queued(_) => {
                return Err(ModelError::Backend(
                    "a token another sequence drew, taken from this one".into(),
                ));
            }
        };
        if self.queue.held.iter().any(|h| h.seq == d.seq) {
            self.submit_queued()?;
        }
        let tickets = &mut self.queue.tickets;
        let at = tickets.iter().position(|(seq, _)| *seq == d.seq);
        let Some((_, ticket)) = at.and_then(|i| tickets.remove(i)) else {
            return Err(ModelError::Backend(
                "a drawn token read twice, or after its step was dropped".into(),
            ));
        };
        let mut id = [0u32];
        self.queue
            .reads
            .read(&self.shared.gpu, ticket, &mut id)
            .map_err(gpu_err("reading a drawn token"))?;
        Ok((id[0] != NO_TOKEN).then_some(id[0]))
    }

    fn queue_depth(&self) -> QueueDepth {
        self.queue.depth
    }

    fn submit_queued(&mut self) -> Result<()> {
        self.submit_held()
            .map_err(gpu_err("submitting sampling steps"))
    }

    fn drop_unsubmitted(&mut self) {
        self.queue.drop_held();
    }

    fn drawn_ids(&mut self, pending: &PendingToken) -> Result<GpuIds> {
        match pending {
            PendingToken::Ready(Some(t)) => Ok(self.ids(&[*t])),
            PendingToken::Ready(None) => Err(SamplerError::NoFiniteLogits.into()),
            PendingToken::Queued(d) if d.owner == self.id && d.seq == self.queue.queued => {
                Ok(self.rec.push_ids(IdsInput::Drawn, 1))
            }
            PendingToken::Queued(_) => Err(ModelError::Backend(
                "a drawn token fed after a later draw overwrote it on the device, or fed to \
                 another sequence"
                    .into(),
            )),
        }
    }
}
