//! Lowering a recorded step to kernel ops, once per step signature ([`Plan`], shared by every
//! sequence), and binding a plan to one sequence's buffers ([`Binding`]: pipelines, uniform
//! arenas and bind groups, once per token slot); [`Plan::run`] then only writes the step's
//! ids and submits.
//!
//! A plan reaches a sequence's KV cache and token slots through a bind-group set per
//! sequence: the plan is lowered against placeholders for those buffers (its template), and
//! [`Plan::bind`] builds the template's copies with the placeholders replaced by the
//! sequence's own buffers. Everything else a plan made (activation buffers, the logits'
//! staging, the sampler's scratch) is shared by the sequences bound to it: the device runs
//! their steps one after the other in submission order, and every such buffer is written by
//! a step before the step reads it.
//!
//! Buffers come from a pool in node order: a value keeps its buffer until its last reader,
//! then the buffer goes back to the pool (best fit by size), so a 30-layer step needs a few
//! buffers, not hundreds. Ops that the kernels do in place (RoPE, bias, scale, soft-cap,
//! residual add) write into their input's buffer when that input is read for the last time,
//! and into a copy otherwise, so the graph's functional ops keep their meaning. A stacked
//! product's outputs share one buffer (one region per projection, each a value with its
//! own reference), which is what the kernels' split outputs write.

use std::collections::HashMap;

use rullama_kernels::ops::attention::{Attention, decode_split_len};
use rullama_kernels::ops::attention_rope::{AttentionRope, Rotate};
use rullama_kernels::ops::elementwise::{add_inplace, add_rows, copy};
use rullama_kernels::ops::embed::embed_rows;
use rullama_kernels::ops::glu::glu;
use rullama_kernels::ops::head_norm_rope::{HeadNormRope, Heads};
use rullama_kernels::ops::head_norm_rope_kv::KvStore;
use rullama_kernels::ops::kv::{KvAppend, KvCache as LayerCache, KvLayout};
use rullama_kernels::ops::matmul::{Matmul, Strides};
use rullama_kernels::ops::matmul_dense::{DenseRoute, DenseScratch};
use rullama_kernels::ops::matvec::{
    Input, NormInput, ResidualRows, ScaledInput, matvec_bias_input, matvec_glu, matvec_glu_out,
    matvec_input, matvec_residual, matvec_split_input, q8_supported, residual_partials,
};
use rullama_kernels::ops::norm::RmsNorm;
use rullama_kernels::ops::quantize::{Q8_BLOCK, q8_words, quantize_q8, quantize_q8_glu};
use rullama_kernels::ops::residual_norm::{NormOut, ResidualNorm};
use rullama_kernels::ops::rope::{Rope, rope_freqs};
use rullama_kernels::ops::sample::{Sample, Sampling, TopKDrawParams};
use rullama_kernels::ops::split::Out;
use rullama_kernels::ops::split_k::SplitK;
use rullama_kernels::ops::unary::unary;
use rullama_kernels::{
    BufferId, Dtype, Gpu, GpuBuffer, GpuError, GpuTensor, GpuWeight, Kernel, Op, OpId, Readback,
    Step, StepBuilder, StepProfile, View, WeightRows,
};

use super::GpuOptions;
use super::fuse::{Fuse, Fusion, ResidualOp, RopeUnit, StackPart};
use super::ir::{AttnNode, IdsInput, IdsKey, Key, KvSlot, Node, RopeSpec, Src};
use super::memory::{Counted, LiveBytes};
use super::weight::{GpuKvCache, GpuWeightRef, next_id};

/// What a product adds to each row it stores (the kernels' bias epilogue): a weight (a
/// bias), or, for one token, an activation (`fuse.rs`, [`Fuse::Accumulate`]).
#[derive(Debug, Clone, Copy)]
enum Addition<'k> {
    Bias(&'k GpuWeightRef),
    Value(Src),
}

/// RoPE frequency tables, made once per (n_rot, base, scale).
#[derive(Debug, Default)]
pub(crate) struct Freqs(HashMap<(usize, u32, u32), GpuTensor>);

impl Freqs {
    /// Bytes of the tables on the device.
    pub fn bytes(&self) -> u64 {
        self.0.values().map(GpuTensor::bytes).sum()
    }

    fn get(&mut self, gpu: &Gpu, s: &RopeSpec) -> GpuTensor {
        let key = (s.n_rot, s.base.to_bits(), s.freq_scale.to_bits());
        self.0
            .entry(key)
            .or_insert_with(|| {
                let f = rope_freqs(s.n_rot, f64::from(s.base), f64::from(s.freq_scale), None);
                GpuTensor::from_f32(gpu, &[f.len()], &f)
            })
            .clone()
    }
}

/// A step's signature lowered to kernel ops once, for every sequence.
///
/// Lowered as a template whose per-sequence buffers are placeholders: `copies` token slots
/// (a sampling step draws into slot 0 of the template and a drawn-token input reads the
/// last slot), one id buffer per host-written ids slot of the key, and a K and a V buffer
/// per KV cache layer the step uses. [`Plan::bind`] replaces them with a sequence's own.
#[derive(Debug)]
pub(crate) struct Plan {
    /// Tells plans apart in a sequence's bindings and queue.
    pub id: u64,
    /// The signature it was lowered from.
    pub key: Key,
    template: StepBuilder,
    /// The placeholder token slots, one per copy.
    tokens: Vec<BufferId>,
    /// The placeholder K and V of each layer the step attends over.
    kv: Vec<(usize, BufferId, BufferId)>,
    /// The key's ids slots: a placeholder buffer for each host-written one.
    ids: Vec<IdsSlot>,
    /// Staging for the output (plans that read logits; a sampling plan's 4-byte id goes
    /// through the sequence's read ring). Behind a lock: sequences on other threads share
    /// it.
    readback: Option<std::sync::Mutex<Readback>>,
    out: GpuTensor,
    out_offset: usize,
    out_len: usize,
    /// Activation buffers (kept for the step's bind groups; counted for reports).
    buffers: usize,
    /// Sampling plans: the draw op (whose parameters change per step) and its scratch.
    draw: Option<Draw>,
    /// The kernel of each dispatch, in order.
    kernels: Vec<Kernel>,
    /// Every device buffer the plan made (activations, staging, draw scratch), counted while
    /// it lives.
    _bytes: Counted,
}

/// One ids slot of a plan's key.
#[derive(Debug, Clone, Copy)]
enum IdsSlot {
    /// Written from the host: the template's placeholder and its length.
    Host(BufferId, usize),
    /// The token the previous step drew, read from its token slot.
    Drawn,
}

/// The sampling ops of a plan: the draw (whose parameters change per step) and the candidate
/// scratch of the selection levels. The id lands in the token slot of the plan copy.
#[derive(Debug)]
struct Draw {
    op: OpId,
    scratch: GpuTensor,
}

/// What a sequence binds a plan to: its KV cache and its token slots.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SeqBuffers<'a> {
    pub cache: &'a GpuKvCache,
    pub tokens: &'a [GpuTensor],
}

/// A plan bound to one sequence's buffers: one copy of the step per token slot, each with
/// its own uniform arena and host id buffers. Of `n` copies, copy `c` reads the drawn token
/// from slot `c - 1` (mod `n`) and draws into slot `c`, so that `n` consecutive steps of
/// one plan (decode) can be recorded into one submission.
#[derive(Debug)]
pub(crate) struct Binding {
    pub plan: std::sync::Arc<Plan>,
    copies: Vec<StepCopy>,
    /// Arenas and id buffers, counted while the binding lives.
    _bytes: Counted,
}

/// One of a binding's copies of the step.
#[derive(Debug)]
struct StepCopy {
    step: Step,
    /// The host-written id buffers, one per host ids slot of the key (`None` for a drawn
    /// slot: the token slot the copy reads).
    ids: Vec<Option<GpuTensor>>,
}

/// A stand-in for a per-sequence buffer in a plan's template: a distinct identity (its own
/// 16-byte buffer) with `like`'s shape, so the lowering's size checks see the real shape.
/// Never bound: [`Plan::bind`] replaces it.
fn placeholder(gpu: &Gpu, like: &[usize], dtype: Dtype) -> GpuTensor {
    GpuTensor {
        shape: like.to_vec(),
        ..GpuTensor::zeros(gpu, &[1], dtype)
    }
}

impl Plan {
    /// Lowers `key` for sequences with `copies` token slots. `options`: whether prompt
    /// matmuls may run on the tensor cores, whether K/V appends fold into the rope ops,
    /// whether decode matvecs read q8 copies of their inputs, and so on; `live`: the
    /// counter of plan bytes.
    pub fn build(
        gpu: &Gpu,
        key: Key,
        freqs: &mut Freqs,
        copies: usize,
        options: &GpuOptions,
        live: &LiveBytes,
    ) -> Result<Plan, GpuError> {
        let tokens: Vec<GpuTensor> = (0..copies.max(1))
            .map(|_| placeholder(gpu, &[1], Dtype::U32))
            .collect();
        // Lowered as copy 0: a drawn token is read from the last slot.
        let drawn = tokens.last().expect("at least one token slot");
        let ids: Vec<GpuTensor> = key
            .ids
            .iter()
            .map(|k| match *k {
                IdsKey::Host(n) => placeholder(gpu, &[n], Dtype::U32),
                IdsKey::Drawn => drawn.clone(),
            })
            .collect();
        let mut kv: Vec<Option<LayerCache>> = Vec::new();
        for node in &key.nodes {
            if let Node::Attention(a) = node {
                let KvSlot { layer, layout } = a.kv;
                if kv.len() <= layer {
                    kv.resize(layer + 1, None);
                }
                let dtype = match layout.dtype {
                    rullama_kernels::ops::kv::KvDtype::F32 => Dtype::F32,
                    rullama_kernels::ops::kv::KvDtype::F16 => Dtype::U32,
                };
                kv[layer].get_or_insert_with(|| LayerCache {
                    k: placeholder(gpu, &[layout.words()], dtype),
                    v: placeholder(gpu, &[layout.words()], dtype),
                    layout,
                });
            }
        }
        let fusion = Fusion::plan(&key, options);
        let last_use = fusion.last_use(&key);
        // Each value's buffer goes back to the pool after the node that reads it last, or
        // right after it is made when nothing reads it.
        let mut release_after = vec![Vec::new(); key.nodes.len()];
        for (v, last) in last_use.iter().enumerate() {
            match *last {
                Some(usize::MAX) => {}
                Some(r) => release_after[r].push(v),
                None if !fusion.folded[v] => release_after[fusion.emit_at[v]].push(v),
                None => {}
            }
        }
        let mut l = Lower {
            gpu,
            key: &key,
            norm_into: fusion.norm_input.clone(),
            scaled_input: fusion.scaled_input.clone(),
            scaled: Vec::new(),
            pool: Pool::default(),
            locs: vec![None; key.nodes.len()],
            last_use,
            ids: &ids,
            kv: &kv,
            freqs,
            step: StepBuilder::new(),
            tensor_cores: options.tensor_cores,
            q8_inputs: options.q8_inputs,
            q8: Vec::new(),
            keep_f32: fusion.keep_f32.clone(),
            splits: Vec::new(),
        };
        for (i, node) in key.nodes.iter().enumerate() {
            let shape = key.shapes[i];
            match &fusion.fuse[i] {
                Fuse::Plain => {
                    let out = l.node(i, node, shape.0 * shape.1)?;
                    l.locs[i] = Some(out);
                }
                Fuse::Folded | Fuse::Done => {}
                Fuse::Residual { pre, out } => l.residual(&key, i, *pre, *out)?,
                Fuse::Rope { q, k, append } => l.head_norm_rope(&key, *q, *k, *append)?,
                Fuse::Attend => {
                    let Node::Attention(a) = node else {
                        return Err(mismatch("an attend-only fusion on another node"));
                    };
                    let out = l.attention(a, shape.0 * shape.1, false)?;
                    l.locs[i] = Some(out);
                }
                Fuse::RopeAttend { q, k } => {
                    let Node::Attention(a) = node else {
                        return Err(mismatch("a rope-attention fusion on another node"));
                    };
                    let out = l.rope_attention(&key, a, *q, *k, shape.0 * shape.1)?;
                    l.locs[i] = Some(out);
                }
                Fuse::GluDown { glu, q8 } => l.glu_down(&key, i, *glu, *q8)?,
                Fuse::Biased { bias } => l.biased(&key, i, *bias)?,
                Fuse::Accumulate { add, other } => l.accumulate(&key, i, *add, *other)?,
                Fuse::ScaledEmbed { scale } => l.scaled_embed(&key, i, *scale)?,
                Fuse::Stack { parts } => l.stack(&key, parts)?,
                Fuse::GluStack { up, glu } => l.glu_stack(&key, i, *up, *glu)?,
                Fuse::ResidualRows(r) => l.residual_rows(&key, i, *r)?,
            }
            for &v in &release_after[i] {
                let buf = l.locs[v].expect("a released value was lowered").buf;
                l.pool.release(buf);
                l.release_q8(v);
            }
        }
        let t = key.target;
        let loc = l.loc(t);
        let out = l.pool.bufs[loc.buf].clone();
        let draw = if key.sample {
            // The last row: [rows, n_vocab] logits, the next token's at the end.
            let row = View::at(&out, loc.offset + (t.rows - 1) * t.cols);
            let sample = Sample { n: t.cols };
            let scratch = GpuTensor::zeros(gpu, &[sample.scratch_len()], Dtype::U32);
            let ops = sample.ops(row, &scratch, (&tokens[0]).into(), &Sampling::greedy(), 0.0)?;
            let op = *l.step.extend(ops).last().expect("the draw is the last op");
            Some(Draw { op, scratch })
        } else {
            None
        };
        let readback = (!key.sample).then(|| Readback::new(gpu, (t.len() * 4) as u64));
        let tensors = l
            .pool
            .bufs
            .iter()
            .chain(&l.splits)
            .chain(draw.iter().map(|d| &d.scratch));
        let bytes = tensors.map(GpuTensor::bytes).sum::<u64>()
            + readback.as_ref().map_or(0, Readback::bytes);
        Ok(Plan {
            id: next_id(),
            kernels: l.step.kernels(),
            template: l.step,
            tokens: tokens.iter().map(|t| t.buf.id()).collect(),
            kv: kv
                .iter()
                .enumerate()
                .filter_map(|(layer, c)| c.as_ref().map(|c| (layer, c.k.buf.id(), c.v.buf.id())))
                .collect(),
            ids: ids
                .iter()
                .zip(&key.ids)
                .map(|(t, k)| match *k {
                    IdsKey::Host(n) => IdsSlot::Host(t.buf.id(), n),
                    IdsKey::Drawn => IdsSlot::Drawn,
                })
                .collect(),
            readback: readback.map(std::sync::Mutex::new),
            out,
            out_offset: loc.offset,
            out_len: t.len(),
            buffers: l.pool.bufs.len(),
            draw,
            _bytes: Counted::new(live, bytes),
            key,
        })
    }

    /// The plan's copies over `seq`'s buffers (as many as it has token slots, which must be
    /// the plan's count); `live`: the counter of sequence bytes.
    pub fn bind(
        self: &std::sync::Arc<Plan>,
        gpu: &Gpu,
        seq: SeqBuffers<'_>,
        live: &LiveBytes,
    ) -> Result<Binding, GpuError> {
        let n = self.tokens.len();
        if seq.tokens.len() != n {
            return Err(mismatch("a sequence with another number of token slots"));
        }
        let mut kv: Vec<(BufferId, &GpuBuffer)> = Vec::with_capacity(2 * self.kv.len());
        for &(layer, k, v) in &self.kv {
            let cache = seq
                .cache
                .layers
                .get(layer)
                .ok_or_else(|| mismatch("a sequence's cache without a layer the step uses"))?;
            kv.push((k, &cache.k.buf));
            kv.push((v, &cache.v.buf));
        }
        let mut copies = Vec::with_capacity(n);
        let mut bytes = 0;
        for c in 0..n {
            // Placeholder slot j is slot j + c, each host id buffer the copy's own.
            let own: Vec<Option<GpuTensor>> = self
                .ids
                .iter()
                .map(|slot| match *slot {
                    IdsSlot::Host(_, len) => Some(GpuTensor::zeros(gpu, &[len], Dtype::U32)),
                    IdsSlot::Drawn => None,
                })
                .collect();
            let mut swap: Vec<(BufferId, &GpuBuffer)> = (0..n)
                .map(|j| (self.tokens[j], &seq.tokens[(j + c) % n].buf))
                .collect();
            swap.extend(kv.iter().copied());
            for (slot, t) in self.ids.iter().zip(&own) {
                if let (IdsSlot::Host(ph, _), Some(t)) = (slot, t) {
                    swap.push((*ph, &t.buf));
                }
            }
            let step = self.template.replacing(&swap).build(gpu);
            bytes += step.arena_bytes() + own.iter().flatten().map(GpuTensor::bytes).sum::<u64>();
            copies.push(StepCopy { step, ids: own });
        }
        Ok(Binding {
            plan: std::sync::Arc::clone(self),
            copies,
            _bytes: Counted::new(live, bytes),
        })
    }

    /// Sets `b`'s copy `copy`'s draw parameters and writes its host ids: the copy is then
    /// ready to submit (through the sequence's read ring, [`Binding::step`]). Only for plans
    /// built with `sample`.
    pub fn prepare_sample(
        &self,
        gpu: &Gpu,
        b: &mut Binding,
        copy: usize,
        ids: &[IdsInput],
        s: &Sampling,
        u: f32,
    ) -> Result<(), GpuError> {
        let draw = self.draw.as_ref().ok_or_else(|| GpuError::InvalidParams {
            op: "sample",
            detail: "this step was built without the sampling op".into(),
        })?;
        let step = &mut b.copies[copy].step;
        let mut params: TopKDrawParams = step.params(draw.op);
        params.draw.set(s, u)?;
        step.set_params(draw.op, &params);
        step.flush(&gpu.queue);
        b.write_ids(gpu, copy, ids);
        Ok(())
    }

    /// Writes `b`'s copy `copy`'s ids, submits it (one encoder, one pass) and reads the
    /// output back.
    pub fn run(
        &self,
        gpu: &Gpu,
        b: &mut Binding,
        copy: usize,
        ids: &[IdsInput],
    ) -> Result<Vec<f32>, GpuError> {
        b.write_ids(gpu, copy, ids);
        let readback = self
            .readback
            .as_ref()
            .ok_or_else(|| GpuError::InvalidParams {
                op: "read",
                detail: "this step was built to sample; it reads back only the token".into(),
            })?;
        let readback = readback.lock().unwrap_or_else(|e| e.into_inner());
        let mut out = vec![0.0f32; self.out_len];
        let step = &mut b.copies[copy].step;
        readback.run_and_read(gpu, step, &self.out, self.out_offset, &mut out)?;
        Ok(out)
    }

    /// Writes `b`'s copy `copy`'s ids and submits it (one encoder, one pass) without waiting
    /// or reading anything back: a step run for what it stores in the KV cache.
    pub fn submit(&self, gpu: &Gpu, b: &mut Binding, copy: usize, ids: &[IdsInput]) {
        b.write_ids(gpu, copy, ids);
        gpu.submit(&mut b.copies[copy].step);
    }

    pub fn dispatches(&self) -> usize {
        self.kernels.len()
    }

    /// The kernel of each dispatch, in order.
    pub fn kernels(&self) -> &[Kernel] {
        &self.kernels
    }

    pub fn buffers(&self) -> usize {
        self.buffers
    }
}

impl Binding {
    /// Copy `copy`'s step.
    pub fn step(&self, copy: usize) -> &Step {
        &self.copies[copy].step
    }

    /// Replays copy `copy` with a timestamp around every dispatch (ids as last written).
    pub fn profile(&mut self, gpu: &Gpu, copy: usize) -> Result<StepProfile, GpuError> {
        self.copies[copy].step.profile(gpu)
    }

    /// Writes copy `copy`'s host ids (a drawn token is already on the device).
    fn write_ids(&self, gpu: &Gpu, copy: usize, ids: &[IdsInput]) {
        for (t, input) in self.copies[copy].ids.iter().zip(ids) {
            if let (Some(t), IdsInput::Host(values)) = (t, input) {
                let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
                gpu.queue.write_buffer(t.buf.raw(), 0, &bytes);
            }
        }
    }
}

/// A prompt block's product beyond its one kernel ([`Lower::route`]), with its scratch.
#[derive(Debug, Clone, Copy)]
enum Route {
    /// Its inputs split `SplitK` ways, the partial sums in the scratch.
    SplitK(SplitK, Loc),
    /// Copied to f16 into the first scratch, then the dense kernel as the route says; a split
    /// route's partial sums in the second.
    Dense(DenseRoute, Loc, Option<Loc>),
}

/// How a product reads its input ([`Lower::feed`]).
#[derive(Debug, Clone, Copy)]
enum Feed {
    /// The input vector as it is.
    Vector,
    /// A q8 copy of it.
    Q8(Loc),
    /// Computed by the product from a residual op.
    Norm(ResidualOp),
    /// A norm's z and partial sums from a residual epilogue ([`Scaled`]).
    Scaled(Scaled),
}

/// Where a residual epilogue put a norm's partial sums (its z is the norm's value), and the
/// norm's eps.
#[derive(Debug, Clone, Copy)]
struct Scaled {
    partials: Loc,
    count: usize,
    eps: f32,
}

/// The operands of a residual op ([`Lower::residual_parts`]).
struct ResidualParts<'k> {
    a: Src,
    h: Src,
    w_in: Option<&'k GpuTensor>,
    w_out: Option<&'k GpuTensor>,
    eps: f32,
}

/// The whole value of node `v`.
fn key_src(key: &Key, v: usize) -> Src {
    let (rows, cols) = key.shapes[v];
    Src {
        value: v,
        row0: 0,
        rows,
        cols,
    }
}

/// A buffer and an element offset in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Loc {
    buf: usize,
    offset: usize,
}

/// Activation buffers with reference counts (one per live value in them).
#[derive(Debug, Default)]
struct Pool {
    bufs: Vec<GpuTensor>,
    refs: Vec<usize>,
    free: Vec<usize>,
}

impl Pool {
    /// A buffer of at least `len` f32s with one reference: the smallest free one that fits,
    /// or a new one.
    fn alloc(&mut self, gpu: &Gpu, len: usize) -> Result<usize, GpuError> {
        let bytes = (len * 4) as u64;
        if bytes > gpu.max_binding_bytes() {
            return Err(GpuError::TooLarge {
                what: "an activation",
                bytes,
                limit: gpu.max_binding_bytes(),
            });
        }
        let best = self
            .free
            .iter()
            .enumerate()
            .filter(|&(_, &b)| self.bufs[b].len() >= len)
            .min_by_key(|&(_, &b)| self.bufs[b].len())
            .map(|(i, _)| i);
        let b = match best {
            Some(i) => self.free.swap_remove(i),
            None => {
                self.bufs
                    .push(GpuTensor::zeros(gpu, &[len.max(1)], Dtype::F32));
                self.refs.push(0);
                self.bufs.len() - 1
            }
        };
        self.refs[b] = 1;
        Ok(b)
    }

    fn retain(&mut self, b: usize) {
        self.refs[b] += 1;
    }

    fn release(&mut self, b: usize) {
        self.refs[b] -= 1;
        if self.refs[b] == 0 {
            self.free.push(b);
        }
    }
}

/// The state of one lowering.
struct Lower<'a> {
    gpu: &'a Gpu,
    key: &'a Key,
    /// The residual op each product computes its input from (`fuse.rs`).
    norm_into: Vec<Option<ResidualOp>>,
    /// The norm each product reads as a residual epilogue's z and partial sums (`fuse.rs`).
    scaled_input: Vec<Option<usize>>,
    /// The residual epilogues' norms so far: the norm node and where its partial sums are.
    scaled: Vec<(usize, Scaled)>,
    pool: Pool,
    /// Where each value lives (`None`: not lowered yet, or folded into a fused kernel).
    locs: Vec<Option<Loc>>,
    /// The last node that reads each value (`usize::MAX`: the step's output).
    last_use: Vec<Option<usize>>,
    ids: &'a [GpuTensor],
    /// The template's stand-ins for the KV cache, by layer.
    kv: &'a [Option<LayerCache>],
    freqs: &'a mut Freqs,
    step: StepBuilder,
    /// Prompt matmuls on the tensor cores where the device has them.
    tensor_cores: bool,
    /// Decode matvecs read their input rounded to int8 where the weight's format has such a
    /// kernel ([`GpuOptions::q8_inputs`]).
    q8_inputs: bool,
    /// The q8 copies made so far (the source and the buffer; by a quantize dispatch or by the
    /// `residual_norm` that made the source): products reading the same input share one,
    /// which lives as long as its source value.
    q8: Vec<(Src, usize)>,
    /// Values that decode products read as f32 even with q8 inputs (`Fusion::keep_f32`).
    keep_f32: Vec<bool>,
    /// The decode attentions' splits buffers (zeroed, one an op: they hold arrival counters
    /// that must be zero between runs, so not from the pool).
    splits: Vec<GpuTensor>,
}

fn mismatch(detail: &str) -> GpuError {
    GpuError::Shape {
        op: "gpu backend",
        detail: detail.to_string(),
    }
}

/// A whole matrix (an embedding table, a down projection read through its GLU).
fn matrix(w: &GpuWeightRef) -> Result<&GpuWeight, GpuError> {
    match w.matrix() {
        Some(m) if w.is_whole() => Ok(m),
        Some(_) => Err(mismatch("one projection of a stacked matrix used whole")),
        None => Err(mismatch("a vector weight used as a matrix")),
    }
}

/// A matrix's rows: all of it, or one projection's of a stack.
fn rows(w: &GpuWeightRef) -> Result<WeightRows<'_>, GpuError> {
    w.matrix_rows()
        .ok_or_else(|| mismatch("a vector weight used as a matrix"))
}

/// A whole vector (a norm's gain).
fn vector(w: &GpuWeightRef) -> Result<&GpuTensor, GpuError> {
    match w.vector() {
        Some(v) if w.is_whole() => Ok(v),
        Some(_) => Err(mismatch("one bias of a stacked vector used whole")),
        None => Err(mismatch("a matrix weight used as a vector")),
    }
}

/// A vector's values: all of it, or one projection's bias of a stack.
fn values(w: &GpuWeightRef) -> Result<View<'_>, GpuError> {
    w.vector_view()
        .ok_or_else(|| mismatch("a matrix weight used as a vector"))
}

impl<'a> Lower<'a> {
    /// The cache stand-in of an attention's layer.
    fn kv_cache(&self, slot: KvSlot) -> Result<&'a LayerCache, GpuError> {
        self.kv
            .get(slot.layer)
            .and_then(Option::as_ref)
            .ok_or_else(|| mismatch("an attention without its cache layer"))
    }

    fn loc(&self, s: Src) -> Loc {
        let l = self.locs[s.value].expect("a value is lowered before it is read");
        Loc {
            buf: l.buf,
            offset: l.offset + s.row0 * s.cols,
        }
    }

    fn view(&self, l: Loc) -> View<'_> {
        View::at(&self.pool.bufs[l.buf], l.offset)
    }

    fn src(&self, s: Src) -> View<'_> {
        self.view(self.loc(s))
    }

    fn alloc(&mut self, len: usize) -> Result<Loc, GpuError> {
        let buf = self.pool.alloc(self.gpu, len)?;
        Ok(Loc { buf, offset: 0 })
    }

    /// A new zeroed splits buffer for `attn` over `layout` (`None`: one split needs none).
    fn splits(&mut self, attn: &Attention, layout: &KvLayout) -> Option<GpuTensor> {
        let len = attn.splits_len(layout);
        (len > 0).then(|| {
            let t = GpuTensor::zeros(self.gpu, &[len], Dtype::U32);
            self.splits.push(t.clone());
            t
        })
    }

    fn push(&mut self, op: Result<Op, GpuError>) -> Result<(), GpuError> {
        self.step.push(op?);
        Ok(())
    }

    fn extend(&mut self, ops: Result<Vec<Op>, GpuError>) -> Result<(), GpuError> {
        self.step.extend(ops?);
        Ok(())
    }

    /// Where an in-place op on `x` at node `i` writes: `x`'s own storage when node `i` is its
    /// last reader (and no other input of the node is the same value), else a copy of `x`.
    fn inplace(&mut self, i: usize, x: Src, others: &[Src]) -> Result<Loc, GpuError> {
        let shared = others.iter().any(|o| o.value == x.value);
        if self.last_use[x.value] == Some(i) && !shared {
            let l = self.loc(x);
            self.pool.retain(l.buf);
            return Ok(l);
        }
        let out = self.alloc(x.len())?;
        let op = copy(self.src(x), self.view(out), x.len());
        self.push(op)?;
        Ok(out)
    }

    /// Lowers node `i` (output `len` values); where its value lives.
    fn node(&mut self, i: usize, node: &Node, len: usize) -> Result<Loc, GpuError> {
        let out = match node {
            Node::Embed { table, ids, n } => self.embed(table, *ids, *n, len, 1.0)?,
            Node::Matmul { w, x } => self.linear(i, w, *x, None, len)?,
            Node::AddBias { x, bias } => {
                let out = self.inplace(i, *x, &[])?;
                let bias = values(bias)?;
                let op = add_rows(self.view(out), bias, x.rows, x.cols);
                self.push(op)?;
                out
            }
            Node::RmsNorm {
                x,
                weight,
                eps,
                group,
            } => {
                let out = self.alloc(len)?;
                let norm = RmsNorm {
                    n: *group,
                    n_rows: len / group,
                    eps: *eps,
                };
                let weight = weight.as_ref().map(vector).transpose()?;
                let op = norm.op(self.src(*x), self.view(out), weight);
                self.push(op)?;
                out
            }
            Node::Rope { x, pos, spec } => {
                let out = self.inplace(i, *x, &[])?;
                let freqs = self.freqs.get(self.gpu, spec);
                let rope = Rope {
                    style: spec.style,
                    head_dim: spec.head_dim,
                    n_rot: spec.n_rot,
                    n_heads: x.cols / spec.head_dim,
                    n_tokens: x.rows,
                };
                let ids = self.ids;
                let op = rope.op(self.view(out), View::from(&ids[*pos]), &freqs);
                self.push(op)?;
                out
            }
            Node::Attention(a) => self.attention(a, len, true)?,
            Node::Glu { gate, up, act } => {
                let out = self.alloc(len)?;
                let op = glu(*act, self.src(*gate), self.src(*up), self.view(out), len);
                self.push(op)?;
                out
            }
            Node::Add { a, b } => {
                let (dst, src) = if self.last_use[a.value] == Some(i) || a.value == b.value {
                    (*a, *b)
                } else {
                    (*b, *a)
                };
                let out = self.inplace(i, dst, &[src])?;
                let op = add_inplace(self.view(out), self.src(src), len);
                self.push(op)?;
                out
            }
            Node::Unary { x, op, value } => {
                let out = self.inplace(i, *x, &[])?;
                let op = unary(*op, self.view(out), len, *value);
                self.push(op)?;
                out
            }
        };
        Ok(out)
    }

    /// `h += [rms_norm(pre)]` in place, then `[out = rms_norm(h)]`: one `residual_norm` op
    /// for add node `i` (see `fuse.rs`). Where a decode product will read `out` as a q8
    /// copy ([`Lower::q8_read`]), the op writes that copy too (`op_q8`), registered in
    /// [`Lower::q8`] so the product finds it and records no quantize dispatch.
    fn residual(
        &mut self,
        key: &Key,
        i: usize,
        pre: Option<usize>,
        out: Option<usize>,
    ) -> Result<(), GpuError> {
        let ResidualParts {
            a: a_src,
            h,
            w_in,
            w_out,
            eps,
        } = self.residual_parts(key, i, pre, out, None)?;
        let (rows, cols) = key.shapes[i];
        let h_loc = self.inplace(i, h, &[a_src])?;
        self.locs[i] = Some(h_loc);
        let y_loc = match out {
            Some(o) => {
                let y = self.alloc(rows * cols)?;
                self.locs[o] = Some(y);
                Some(y)
            }
            None => None,
        };
        let q8 = match out {
            Some(o) if rows == 1 => self.q8_read(key, o),
            _ => None,
        };
        let q_loc = q8.map(|_| self.alloc(q8_words(cols))).transpose()?;
        let norm = ResidualNorm {
            n: cols,
            n_rows: rows,
            eps,
        };
        let out = y_loc.zip(w_out).map(|(y, weight)| NormOut {
            y: self.view(y),
            weight,
        });
        let (a, h) = (self.src(a_src), self.view(h_loc));
        let op = match (out, q_loc) {
            (Some(out), Some(q)) => norm.op_q8(a, w_in, h, out, self.view(q)),
            (out, _) => norm.op(a, w_in, h, out),
        };
        self.push(op)?;
        if let (Some(x), Some(q)) = (q8, q_loc) {
            self.q8.push((x, q.buf));
        }
        Ok(())
    }

    /// The product at matmul node `m` with the residual op `r` over its value done row by row
    /// (`fuse.rs`, [`Fuse::ResidualRows`]): h updated in place (or in a copy, as
    /// [`Lower::inplace`] decides), the norm's z and the partial sums in one new buffer (z
    /// first, the norm's value for liveness), which the norm's readers find in
    /// [`Lower::scaled`].
    fn residual_rows(&mut self, key: &Key, m: usize, r: ResidualOp) -> Result<(), GpuError> {
        let Node::Matmul { w, x } = &key.nodes[m] else {
            return Err(mismatch(
                "a residual epilogue on a node other than a matmul",
            ));
        };
        let parts = self.residual_parts(key, r.add, r.pre, Some(r.out), Some(m))?;
        if parts.a.value != m || parts.w_in.is_some() {
            return Err(mismatch(
                "a residual epilogue whose addend is not its plain product",
            ));
        }
        let w_out = parts
            .w_out
            .ok_or_else(|| mismatch("a residual epilogue without its norm's gain"))?;
        let w = matrix(w)?;
        let n = key.shapes[r.add].1;
        let count = residual_partials(w);
        let h = self.inplace(m, parts.h, &[*x])?;
        self.locs[r.add] = Some(h);
        let z_len = n.next_multiple_of(4);
        let z = self.alloc(z_len + count)?;
        self.locs[r.out] = Some(z);
        let partials = Loc {
            buf: z.buf,
            offset: z_len,
        };
        let scaled = Scaled {
            partials,
            count,
            eps: parts.eps,
        };
        self.scaled.push((r.out, scaled));
        let rows = ResidualRows {
            h: self.view(h),
            w_out,
            z: self.view(z),
            partials: self.view(partials),
        };
        let op = matvec_residual(w, self.src(*x), rows);
        self.push(op)
    }

    /// The operands of the residual op at add node `i`: `a` (the folded norm's input, or
    /// the add's other operand), `h` (the operand that is not the folded norm; without one,
    /// the operand that is not `addend`, or else the one this add reads last, so it is
    /// updated in place), the gains and the eps (the norms share one: `fuse.rs`).
    fn residual_parts<'k>(
        &self,
        key: &'k Key,
        i: usize,
        pre: Option<usize>,
        out: Option<usize>,
        addend: Option<usize>,
    ) -> Result<ResidualParts<'k>, GpuError> {
        let Node::Add { a, b } = &key.nodes[i] else {
            return Err(mismatch("a residual fusion on a node other than an add"));
        };
        let (h, a) = match (pre, addend) {
            (Some(p), _) if a.value == p => (*b, *a),
            (Some(_), _) => (*a, *b),
            (None, Some(m)) if a.value == m => (*b, *a),
            (None, Some(_)) => (*a, *b),
            (None, None) if self.last_use[a.value] == Some(i) => (*a, *b),
            (None, None) => (*b, *a),
        };
        let (a, w_in, eps) = match pre.map(|p| &key.nodes[p]) {
            Some(Node::RmsNorm { x, weight, eps, .. }) => (*x, weight.as_ref(), *eps),
            _ => (a, None, 0.0),
        };
        let norm_out = out.map(|o| match &key.nodes[o] {
            Node::RmsNorm { weight, eps, .. } => (weight.as_ref(), *eps),
            _ => (None, 0.0),
        });
        let eps = norm_out.map_or(eps, |(_, e)| e);
        let w_out = match norm_out {
            Some((Some(w), _)) => Some(vector(w)?),
            _ => None,
        };
        Ok(ResidualParts {
            a,
            h,
            w_in: w_in.map(vector).transpose()?,
            w_out,
            eps,
        })
    }

    /// How a decode product over a weight with an integer-dot kernel reads value `v`, when one
    /// does and the q8 mode is on: one whole row of whole blocks, the `Src` its
    /// [`Lower::q8_input`] looks the copy up by. A norm that makes `v` then writes the copy.
    fn q8_read(&self, key: &Key, v: usize) -> Option<Src> {
        key.nodes.iter().find_map(|node| match node {
            Node::Matmul { w, x }
                if x.value == v && x.row0 == 0 && rows(w).is_ok_and(|r| self.reads_q8(x, r)) =>
            {
                Some(*x)
            }
            _ => None,
        })
    }

    /// Whether a product over `rows` reads `x` through a q8 copy: the q8 mode is on, `x` is
    /// one row of whole blocks (decode), the weight's format has an integer-dot kernel and
    /// the fusions do not keep `x` in f32 (a GLU stored for a small down projection).
    /// The one rule for both who makes the copy ([`Lower::q8_read`]) and who reads it
    /// ([`Lower::q8_input`]).
    fn reads_q8(&self, x: &Src, rows: WeightRows<'_>) -> bool {
        self.q8_inputs
            && x.rows == 1
            && x.cols.is_multiple_of(Q8_BLOCK)
            && q8_supported(rows.w.shape.format)
            && !self.keep_f32[x.value]
    }

    /// Per-head norm (where the graph has one) and RoPE of q and k, in place, one op; with
    /// `append` (an attention node) k's finished heads and that attention's v stored into its
    /// cache as well.
    fn head_norm_rope(
        &mut self,
        key: &Key,
        q: RopeUnit,
        k: Option<RopeUnit>,
        append: Option<usize>,
    ) -> Result<(), GpuError> {
        let nodes = &key.nodes;
        let Node::Rope { pos, spec, .. } = &nodes[q.rope] else {
            return Err(mismatch("a rope fusion without a rope"));
        };
        let (pos, spec) = (*pos, *spec);
        let mut eps = 0.0;
        let mut place =
            |l: &mut Self, u: RopeUnit| -> Result<(Loc, Src, Option<GpuTensor>), GpuError> {
                let x = u.input(nodes);
                let weight = match u.norm.map(|n| &nodes[n]) {
                    Some(Node::RmsNorm {
                        weight: Some(w),
                        eps: e,
                        ..
                    }) => {
                        eps = *e;
                        Some(vector(w)?.clone())
                    }
                    _ => None,
                };
                let loc = l.inplace(q.first(), x, &[])?;
                l.locs[u.rope] = Some(loc);
                Ok((loc, x, weight))
            };
        let (q_loc, q_x, q_w) = place(self, q)?;
        let k_placed = k.map(|k| place(self, k)).transpose()?;
        let freqs = self.freqs.get(self.gpu, &spec);
        let op = HeadNormRope {
            style: spec.style,
            head_dim: spec.head_dim,
            n_rot: spec.n_rot,
            n_tokens: q_x.rows,
            eps,
        };
        fn heads<'a>(
            bufs: &'a [GpuTensor],
            l: (Loc, Src, Option<&'a GpuTensor>),
            hd: usize,
        ) -> Heads<'a> {
            let (loc, x, weight) = l;
            Heads {
                x: View::at(&bufs[loc.buf], loc.offset),
                n_heads: x.cols / hd,
                stride: x.cols,
                weight,
            }
        }
        let bufs = &self.pool.bufs;
        let ids = self.ids;
        let q_heads = heads(bufs, (q_loc, q_x, q_w.as_ref()), spec.head_dim);
        let k_heads = k_placed
            .as_ref()
            .map(|(loc, x, w)| heads(bufs, (*loc, *x, w.as_ref()), spec.head_dim));
        let pos = View::from(&ids[pos]);
        let op = match (append.map(|a| &nodes[a]), k_heads) {
            (None, k) => op.op(q_heads, k, pos, &freqs),
            (Some(Node::Attention(a)), Some(k)) => {
                let kv = KvStore {
                    v: self.src(a.v),
                    v_stride: a.v.cols,
                    cache: self.kv_cache(a.kv)?,
                };
                op.op_kv(q_heads, k, kv, pos, &freqs)
            }
            _ => return Err(mismatch("a K/V store without k or an attention")),
        };
        self.push(op)
    }

    /// `x W^T [+ bias]` into a new buffer of `len` values: the matvec for one token, the
    /// tiled matmul for a block (on the tensor cores where the device has them and the
    /// backend allows).
    fn linear(
        &mut self,
        m: usize,
        w: &GpuWeightRef,
        x: Src,
        bias: Option<Addition<'_>>,
        len: usize,
    ) -> Result<Loc, GpuError> {
        let out = self.alloc(len)?;
        let rows = rows(w)?;
        let feed = self.feed(m, x, rows)?;
        let route = self.route(rows, x, feed)?;
        let outs = [Out::new(self.view(out), rows.n)];
        let ops = self.product(rows, x, feed, bias, &outs, route);
        self.record_product(ops, route)?;
        Ok(out)
    }

    /// How a prompt block's product over `rows` runs beyond its one kernel, with scratches
    /// from the pool: on the dense route (`ops::matmul_dense`: long blocks, the weight
    /// copied to f16 once; its sum split where it has few output tiles, the partial sums in
    /// a second scratch) or with its inputs split (`ops::split_k`: products of few output
    /// tiles). A product reading a fused input (decode only) takes neither.
    fn route(
        &mut self,
        rows: WeightRows<'_>,
        x: Src,
        feed: Feed,
    ) -> Result<Option<Route>, GpuError> {
        if !matches!(feed, Feed::Vector) {
            return Ok(None);
        }
        let block = self.block(x.rows);
        let caps = &self.gpu.caps;
        if let Some(dense) = block.dense_route(caps, rows, self.gpu.max_binding_bytes()) {
            let copy = self.alloc(block.dense_copy_len(rows))?;
            let partials = match block.dense_partials_len(rows, dense) {
                0 => None,
                len => Some(self.alloc(len)?),
            };
            return Ok(Some(Route::Dense(dense, copy, partials)));
        }
        match block.split_k(caps, rows) {
            Some(k) => {
                let scratch = self.alloc(block.split_k_scratch(rows, k))?;
                Ok(Some(Route::SplitK(k, scratch)))
            }
            None => Ok(None),
        }
    }

    /// Records a product's ops; its route's scratch, if any, goes back to the pool (the ops
    /// that read it are recorded).
    fn record_product(
        &mut self,
        ops: Result<Vec<Op>, GpuError>,
        route: Option<Route>,
    ) -> Result<(), GpuError> {
        self.extend(ops)?;
        let scratches = match route {
            Some(Route::SplitK(_, scratch)) => [Some(scratch), None],
            Some(Route::Dense(_, copy, partials)) => [Some(copy), partials],
            None => [None, None],
        };
        for scratch in scratches.into_iter().flatten() {
            self.pool.release(scratch.buf);
        }
        Ok(())
    }

    /// How the product at matmul node `m` reads `x`: as the z and partial sums of the
    /// residual epilogue that made it ([`Lower::residual_rows`]), computed from the residual
    /// op folded into it (`fuse.rs`, [`ResidualOp`]; its h and x then get one buffer, which
    /// the kernel writes), as a q8 copy ([`Lower::q8_input`]), or as it is.
    fn feed(&mut self, m: usize, x: Src, rows: WeightRows<'_>) -> Result<Feed, GpuError> {
        if let Some(o) = self.scaled_input[m] {
            return self
                .scaled
                .iter()
                .find(|(norm, _)| *norm == o && x.value == o)
                .map(|&(_, s)| Feed::Scaled(s))
                .ok_or_else(|| mismatch("a scaled input before its residual epilogue"));
        }
        if let Some(n) = self.norm_into[m] {
            let buf = self.alloc(2 * x.cols)?.buf;
            self.pool.retain(buf);
            self.locs[n.add] = Some(Loc { buf, offset: 0 });
            self.locs[n.out] = Some(Loc {
                buf,
                offset: x.cols,
            });
            return Ok(Feed::Norm(n));
        }
        Ok(match self.q8_input(x, rows)? {
            Some(q) => Feed::Q8(q),
            None => Feed::Vector,
        })
    }

    /// What a decode product over `x` reads, as [`Lower::feed`] decided.
    fn input(&self, x: Src, feed: Feed) -> Result<Input<'_>, GpuError> {
        Ok(match feed {
            Feed::Vector => Input::Plain(self.src(x)),
            Feed::Q8(q) => Input::Q8(self.view(q)),
            Feed::Norm(n) => Input::Norm(self.norm_input(n)?),
            Feed::Scaled(s) => Input::Scaled(ScaledInput {
                z: self.src(x),
                partials: self.view(s.partials),
                count: s.count,
                eps: s.eps,
            }),
        })
    }

    /// The input of a product that computes it from the residual op `n` ([`Lower::feed`]
    /// placed its outputs).
    fn norm_input(&self, n: ResidualOp) -> Result<NormInput<'_>, GpuError> {
        let key = self.key;
        let parts = self.residual_parts(key, n.add, n.pre, Some(n.out), None)?;
        let w_out = parts
            .w_out
            .ok_or_else(|| mismatch("a folded residual op without its norm's gain"))?;
        let h_out = self.loc(key_src(key, n.add));
        Ok(NormInput {
            a: self.src(parts.a),
            w_in: parts.w_in,
            h: self.src(parts.h),
            w_out,
            h_out: self.view(h_out),
            x_out: self.view(self.loc(key_src(key, n.out))),
            eps: parts.eps,
        })
    }

    /// Where the q8 copy of `x` lives for a decode product over `rows`, when the q8 mode is
    /// on and the weight's format has an integer-dot kernel: written by the `residual_norm`
    /// that made `x` ([`Lower::residual`]), else made by the first product that reads `x`
    /// (one quantize dispatch); shared by the later ones (q|k and a v of another format,
    /// say); it goes back to the pool with `x` ([`Lower::release_q8`]).
    fn q8_input(&mut self, x: Src, rows: WeightRows<'_>) -> Result<Option<Loc>, GpuError> {
        if !self.reads_q8(&x, rows) {
            return Ok(None);
        }
        if let Some(&(_, buf)) = self.q8.iter().find(|(s, _)| *s == x) {
            return Ok(Some(Loc { buf, offset: 0 }));
        }
        let q = self.alloc(q8_words(x.cols))?;
        let op = quantize_q8(self.src(x), self.view(q), x.cols);
        self.push(op)?;
        self.q8.push((x, q.buf));
        Ok(Some(q))
    }

    /// Value `v` went back to the pool: so do the q8 copies made of it.
    fn release_q8(&mut self, v: usize) {
        let pool = &mut self.pool;
        self.q8.retain(|&(src, buf)| {
            let of_v = src.value == v;
            if of_v {
                pool.release(buf);
            }
            !of_v
        });
    }

    /// The prompt matmul of a block of `n_tokens` packed rows, on the tensor cores where the
    /// backend allows them.
    fn block(&self, n_tokens: usize) -> Matmul {
        Matmul {
            n_tokens,
            strides: Strides::default(),
            tensor_cores: self.tensor_cores,
        }
    }

    /// `x W^T [+ bias]` over `rows` (all of a weight, or rows of a stacked one), the rows
    /// into `outs` in turn (regions of one buffer; one output whose rows are contiguous
    /// when `x` is one token): a weight taken whole into one output runs the one-output
    /// kernel, anything else its split outputs; a block of tokens on the tensor cores where
    /// the device has them and the backend allows.
    /// A decode product reads its input as `feed` says; a prompt block's product takes the
    /// route [`Lower::route`] chose.
    fn product(
        &self,
        rows: WeightRows<'_>,
        x: Src,
        feed: Feed,
        bias: Option<Addition<'_>>,
        outs: &[Out<'_>],
        route: Option<Route>,
    ) -> Result<Vec<Op>, GpuError> {
        let bias = match bias {
            Some(Addition::Bias(w)) => Some(values(w)?),
            Some(Addition::Value(v)) => Some(self.src(v)),
            None => None,
        };
        let xv = self.src(x);
        let input = self.input(x, feed)?;
        let n = x.rows;
        let block = self.block(n);
        match route {
            Some(Route::SplitK(k, scratch)) => {
                return block.split_k_ops(rows, xv, bias, outs, self.view(scratch), k);
            }
            Some(Route::Dense(dense, copy, partials)) => {
                let scratch = DenseScratch {
                    copy: self.view(copy),
                    partials: partials.map(|p| self.view(p)),
                };
                return block.dense_route_ops(dense, rows, xv, bias, outs, scratch);
            }
            None => {}
        }
        let caps = &self.gpu.caps;
        match (outs, bias) {
            ([one], None) if rows.is_whole() && n == 1 => matvec_input(rows.w, input, one.y),
            ([one], Some(b)) if rows.is_whole() && n == 1 => {
                matvec_bias_input(rows.w, input, b, one.y)
            }
            ([one], _) if rows.is_whole() => block.ops(caps, rows.w, xv, bias, one.y),
            _ if n == 1 => matvec_split_input(rows, input, bias, outs),
            _ => block.split_ops(caps, rows, xv, bias, outs),
        }
    }

    /// One product for the matmuls of a stacked weight (`fuse.rs`, [`Fuse::Stack`]): their
    /// values share one buffer, each in its own region (contiguous for one token: one
    /// output of the concatenated rows; for a block, one output per part with its own
    /// token rows).
    fn stack(&mut self, key: &Key, parts: &[StackPart]) -> Result<(), GpuError> {
        let nodes = &key.nodes;
        let Node::Matmul { w, x } = &nodes[parts[0].matmul] else {
            return Err(mismatch("a stacked product on a node other than a matmul"));
        };
        let bias = match parts[0].bias.map(|b| &nodes[b]) {
            Some(Node::AddBias { bias, .. }) => Some(Addition::Bias(bias)),
            _ => None,
        };
        let n_rows: Vec<usize> = parts.iter().map(|p| key.shapes[p.matmul].1).collect();
        let total: usize = n_rows.iter().sum();
        let buf = self.alloc(x.rows * total)?.buf;
        let mut at = 0;
        for (i, (p, &n)) in parts.iter().zip(&n_rows).enumerate() {
            if i > 0 {
                self.pool.retain(buf);
            }
            self.locs[p.value()] = Some(Loc { buf, offset: at });
            at += x.rows * n;
        }
        let first = rows(w)?;
        let rows = first.w.rows(first.first..first.first + total);
        let feed = self.feed(parts[0].matmul, *x, rows)?;
        let route = self.route(rows, *x, feed)?;
        let t = &self.pool.bufs[buf];
        let outs: Vec<Out<'_>> = if x.rows == 1 {
            vec![Out::new(View::from(t), total)]
        } else {
            let mut at = 0;
            n_rows
                .iter()
                .map(|&n| {
                    let o = Out::new(View::at(t, at), n);
                    at += x.rows * n;
                    o
                })
                .collect()
        };
        let ops = self.product(rows, *x, feed, bias, &outs, route);
        self.record_product(ops, route)
    }

    /// The matvec over gate|up (matmul nodes `gate` and `up`, one token, consecutive rows of
    /// one stacked upload) that stores GLU node `g`'s value (`fuse.rs`, [`Fuse::GluStack`]):
    /// gate's and up's values are never stored. With q8 inputs it reads the q8 copy of its
    /// input as the stacked product would.
    fn glu_stack(&mut self, key: &Key, gate: usize, up: usize, g: usize) -> Result<(), GpuError> {
        let nodes = &key.nodes;
        let (Node::Matmul { w, x }, Node::Glu { act, .. }) = (&nodes[gate], &nodes[g]) else {
            return Err(mismatch("a GLU epilogue on other nodes"));
        };
        let n_ff = key.shapes[gate].1;
        if key.shapes[up].1 != n_ff || x.rows != 1 {
            return Err(mismatch("a GLU epilogue over gate and up of other shapes"));
        }
        let out = self.alloc(n_ff)?;
        self.locs[g] = Some(out);
        let first = rows(w)?;
        let rows = first.w.rows(first.first..first.first + 2 * n_ff);
        let feed = self.feed(gate, *x, rows)?;
        let ops = self
            .input(*x, feed)
            .and_then(|input| matvec_glu_out(rows, *act, input, self.view(out)));
        self.extend(ops)
    }

    /// The gather of `n` rows of `table` by id tensor `ids`, each value times `scale`.
    fn embed(
        &mut self,
        table: &GpuWeightRef,
        ids: usize,
        n: usize,
        len: usize,
        scale: f32,
    ) -> Result<Loc, GpuError> {
        let out = self.alloc(len)?;
        let all = self.ids;
        let ops = embed_rows(
            matrix(table)?,
            View::from(&all[ids]),
            n,
            self.view(out),
            scale,
        );
        self.extend(ops)?;
        Ok(out)
    }

    /// The gather `e` storing scale node `u`'s value (`fuse.rs`, [`Fuse::ScaledEmbed`]).
    fn scaled_embed(&mut self, key: &Key, e: usize, u: usize) -> Result<(), GpuError> {
        let (Node::Embed { table, ids, n }, Node::Unary { value, .. }) =
            (&key.nodes[e], &key.nodes[u])
        else {
            return Err(mismatch("a scaled-embedding fusion on other nodes"));
        };
        let (rows, cols) = key.shapes[e];
        let out = self.embed(table, *ids, *n, rows * cols, *value)?;
        self.locs[u] = Some(out);
        Ok(())
    }

    /// Matmul node `m` with `add_bias` node `b` as its epilogue: its output is `b`'s value.
    fn biased(&mut self, key: &Key, m: usize, b: usize) -> Result<(), GpuError> {
        let (Node::Matmul { w, x }, Node::AddBias { bias, .. }) = (&key.nodes[m], &key.nodes[b])
        else {
            return Err(mismatch("a bias fusion on other nodes"));
        };
        let (rows, cols) = key.shapes[m];
        let out = self.linear(m, w, *x, Some(Addition::Bias(bias)), rows * cols)?;
        self.locs[b] = Some(out);
        Ok(())
    }

    /// Matmul node `m` (one token) whose value add node `add` adds to `other`: the matvec
    /// adds `other` as it stores each row (`fuse.rs`, [`Fuse::Accumulate`]); its output is the
    /// add's value.
    fn accumulate(&mut self, key: &Key, m: usize, add: usize, other: Src) -> Result<(), GpuError> {
        let Node::Matmul { w, x } = &key.nodes[m] else {
            return Err(mismatch(
                "an accumulating product on a node other than a matmul",
            ));
        };
        let (rows, cols) = key.shapes[m];
        let out = self.linear(m, w, *x, Some(Addition::Value(other)), rows * cols)?;
        self.locs[add] = Some(out);
        Ok(())
    }

    /// The down projection of one token reading `act(gate) * up` as its input: computed as
    /// the matvec reads it, or (`q8`) quantized once into a q8 copy that the matvec reads.
    fn glu_down(&mut self, key: &Key, d: usize, g: usize, q8: bool) -> Result<(), GpuError> {
        let (Node::Matmul { w, .. }, Node::Glu { gate, up, act }) = (&key.nodes[d], &key.nodes[g])
        else {
            return Err(mismatch("a GLU fusion on other nodes"));
        };
        let w = matrix(w)?;
        let (rows, cols) = key.shapes[d];
        let out = self.alloc(rows * cols)?;
        self.locs[d] = Some(out);
        if !q8 {
            let ops = matvec_glu(w, *act, self.src(*gate), self.src(*up), self.view(out));
            return self.extend(ops);
        }
        let q = self.alloc(q8_words(w.shape.n_in))?;
        let n = w.shape.n_in;
        let op = quantize_q8_glu(*act, self.src(*gate), self.src(*up), self.view(q), n);
        self.push(op)?;
        let ops = matvec_input(w, Input::Q8(self.view(q)), self.view(out));
        self.extend(ops)?;
        self.pool.release(q.buf);
        Ok(())
    }

    /// One decode token's attention that norms and rotates q and k itself (the units' nodes,
    /// folded into it) and stores k and v into the cache first (`attention_rope`).
    fn rope_attention(
        &mut self,
        key: &Key,
        a: &AttnNode,
        q: RopeUnit,
        k: RopeUnit,
        len: usize,
    ) -> Result<Loc, GpuError> {
        let nodes = &key.nodes;
        let Node::Rope { spec, .. } = &nodes[q.rope] else {
            return Err(mismatch("a rope-attention fusion without a rope"));
        };
        let spec = *spec;
        let mut eps = 0.0;
        let mut weight = |u: RopeUnit| -> Result<Option<GpuTensor>, GpuError> {
            match u.norm.map(|n| &nodes[n]) {
                Some(Node::RmsNorm {
                    weight: Some(w),
                    eps: e,
                    ..
                }) => {
                    eps = *e;
                    Ok(Some(vector(w)?.clone()))
                }
                _ => Ok(None),
            }
        };
        let (wq, wk) = (weight(q)?, weight(k)?);
        let freqs = self.freqs.get(self.gpu, &spec);
        let out = self.alloc(len)?;
        let cache = self.kv_cache(a.kv)?;
        let layout = cache.layout;
        let attn = Attention {
            n_tokens: 1,
            n_heads: a.n_head,
            q_stride: a.q.cols,
            scale: a.scale,
            softcap: a.softcap,
            window: a.window,
            split_len: decode_split_len(layout.max_len),
        };
        let splits = self.splits(&attn, &layout);
        let op = AttentionRope {
            attn,
            style: spec.style,
            n_rot: spec.n_rot,
            eps,
        };
        let rot = Rotate {
            k: self.src(k.input(nodes)),
            v: self.src(a.v),
            wq: wq.as_ref(),
            wk: wk.as_ref(),
            freqs: &freqs,
        };
        let ids = self.ids;
        let pos = View::from(&ids[a.pos]);
        let ops = op.ops(
            self.src(q.input(nodes)),
            rot,
            pos,
            cache,
            self.view(out),
            splits.as_ref(),
        );
        self.extend(ops)?;
        Ok(out)
    }

    /// K/V append at the step's positions (unless the rope op did it: `append` false), then
    /// attention (with a split scratch in decode; a prompt block's on the tensor cores where
    /// the device has them, they are allowed and the cache is f16: `Attention::coop_ops`).
    fn attention(&mut self, a: &AttnNode, len: usize, append: bool) -> Result<Loc, GpuError> {
        let out = self.alloc(len)?;
        let n = a.q.rows;
        let cache = self.kv_cache(a.kv)?;
        let layout = cache.layout;
        let ids = self.ids;
        let pos = View::from(&ids[a.pos]);
        if append {
            let append = KvAppend {
                n_tokens: n,
                src_stride: a.k.cols,
            };
            let op = append.op(self.src(a.k), self.src(a.v), pos, cache);
            self.push(op)?;
        }
        let attn = Attention {
            n_tokens: n,
            n_heads: a.n_head,
            q_stride: a.q.cols,
            scale: a.scale,
            softcap: a.softcap,
            window: a.window,
            split_len: if n == 1 {
                decode_split_len(layout.max_len)
            } else {
                layout.max_len
            },
        };
        // Every block of more than one token (decode keeps the f32 kernel's splits). A block
        // of fewer than 64 / group tokens fills only part of the tensor-core kernel's 64-row
        // tile (one workgroup a kv head); no cut-over to the f32 kernel below that has been
        // measured.
        if n > 1 && self.tensor_cores && self.gpu.caps.coop_f16 && attn.coop_fits(&layout) {
            // A block of few row tiles splits their keys; the splits' partial results live in
            // a pool buffer only until the op's combine has read them.
            let splits = attn.coop_key_splits(&layout);
            let len = attn.coop_scratch_len(&layout, splits);
            let scratch = (len > 0).then(|| self.alloc(len)).transpose()?;
            let ops = attn.coop_ops(
                self.src(a.q),
                pos,
                cache,
                self.view(out),
                scratch.map(|s| self.view(s)),
                splits,
            );
            self.extend(ops)?;
            if let Some(s) = scratch {
                self.pool.release(s.buf);
            }
            return Ok(out);
        }
        let splits = self.splits(&attn, &layout);
        let ops = attn.ops(self.src(a.q), pos, cache, self.view(out), splits.as_ref());
        self.extend(ops)?;
        Ok(out)
    }
}
