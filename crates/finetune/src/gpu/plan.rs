//! Lowering a recorded step into kernels: the forward, the loss head in chunks of rows, and
//! (for a training step) the backward in reverse, into one [`Step`] built once and replayed.
//!
//! Buffers come from a pool as the ops are emitted: a value's buffer goes back after its
//! last reader. A value some backward kernel reads (a trainable product's input, a norm's
//! input, attention's q, k, v, output and log-sum-exp, a GLU's gate and up) is a capture: it
//! stays until the last backward that reads it. Gradients follow the same rule (one per
//! value, added into where several ops read the value), and a parameter's gradient is added
//! into its slice of the engine's gradient buffer, which gathers a whole optimizer step.
//! Since the step is one compute pass, wgpu orders every dispatch after the ones whose
//! buffers it shares, so a reused buffer is never written while an earlier op reads it.

use std::collections::HashMap;

use rullama_kernels::ops::attention_backward::TrainAttentionBackward;
use rullama_kernels::ops::attention_train::TrainAttentionForward;
use rullama_kernels::ops::cross_entropy::CrossEntropy;
use rullama_kernels::ops::glu_backward::{GluBackward, glu_backward};
use rullama_kernels::ops::matmul::{Matmul, Strides};
use rullama_kernels::ops::matmul_input_grad::MatmulInputGrad;
use rullama_kernels::ops::matmul_weight_grad::MatmulWeightGrad;
use rullama_kernels::ops::{dropout, elementwise, embed, glu, unary};
use rullama_kernels::{
    Dtype, Gpu, GpuError, GpuTensor, GpuWeight, Op, OpId, Readback, Step, StepBuilder, View,
};
use rullama_model::ModelError;

use crate::error::{FinetuneError, Result};

use super::gpu_err;
use super::record::{GpuTape, Node, ValueId};

/// The trainable parameters as the plan binds them: each one's matrix (its f32 buffer) and
/// where its gradient goes in the gradient buffer.
#[derive(Debug)]
pub(crate) struct ParamBindings<'a> {
    /// Parameter `id`'s values as an F32 matrix (`n_out` rows of `n_in`).
    pub weights: &'a [GpuWeight],
    /// The gradients of every parameter, one after another.
    pub grads: &'a GpuTensor,
    /// Where parameter `id`'s gradient starts in `grads`.
    pub offsets: &'a [usize],
}

/// A built step over one recording's shape.
#[derive(Debug)]
pub(crate) struct Plan {
    pub step: Step,
    /// One u32 buffer per id list of the recording (tokens, positions), written each run.
    pub ids: Vec<GpuTensor>,
    /// Attention's `start[]` (each row's sequence's first row), made from id list `.0`.
    pub starts: Vec<(usize, GpuTensor)>,
    /// Each row's next-token target (`MASKED` where none).
    pub targets: GpuTensor,
    /// Each row's cross-entropy, read back after a run.
    pub loss: GpuTensor,
    /// The cross-entropy ops, whose gradient weight changes from run to run.
    pub loss_ops: Vec<OpId>,
    /// The dropout ops and their products' nodes: each run draws new masks (the same node's
    /// forward and backward one mask).
    pub dropout_ops: Vec<(OpId, ValueId)>,
    pub readback: Readback,
}

/// What the recording ends in: the LM head `x · Wᵀ` (optionally soft-capped), whose rows
/// the plan runs in chunks with the loss.
struct Head<'a> {
    w: &'a GpuWeight,
    x: ValueId,
    softcap: f32,
    /// The nodes the head stands for, which the forward skips.
    nodes: Vec<ValueId>,
}

fn head<'a>(nodes: &'a [Node], logits: ValueId) -> Result<Head<'a>> {
    let unsupported = || {
        ModelError::Unsupported(
            "a training step whose logits are not the LM head's product (or its soft-cap)".into(),
        )
    };
    let (product, softcap) = match nodes[logits] {
        Node::Softcap { x, cap } => (x, cap),
        _ => (logits, 0.0),
    };
    match &nodes[product] {
        Node::Matmul { w, x } => Ok(Head {
            w,
            x: *x,
            softcap,
            nodes: vec![product, logits],
        }),
        _ => Err(unsupported().into()),
    }
}

/// A split product aims at about this many workgroups (8 an SM of an H100), in at most
/// [`MAX_SPLITS`] splits of at least [`MIN_SPLIT_SUM`] terms each.
const TARGET_WORKGROUPS: usize = 1024;
const MAX_SPLITS: usize = 16;
const MIN_SPLIT_SUM: usize = 64;

/// 64-wide output tiles over `n` (the backward products' tile side).
fn tiles(n: usize) -> usize {
    n.div_ceil(64)
}

/// How many ways to split a product of `tiles` output tiles whose sums run over `sum_len`
/// terms: enough workgroups to fill the device where the output alone would not.
fn splits(tiles: usize, sum_len: usize) -> usize {
    let want = (TARGET_WORKGROUPS / tiles.max(1)).clamp(1, MAX_SPLITS);
    want.min(sum_len / MIN_SPLIT_SUM).max(1)
}

/// Whether each value depends on a trainable parameter.
fn trainable(nodes: &[Node]) -> Vec<bool> {
    let mut t = vec![false; nodes.len()];
    for (i, node) in nodes.iter().enumerate() {
        t[i] = matches!(node, Node::Param { .. }) || node.inputs().iter().any(|&x| t[x]);
    }
    t
}

/// The values node `i`'s backward reads besides its output's gradient (its own output: the
/// attention's o). A product with dropout reads its masked input instead, which it keeps
/// itself.
fn captures(nodes: &[Node], i: usize) -> Vec<ValueId> {
    match nodes[i] {
        Node::Param { dropout, .. } if dropout > 0.0 => vec![],
        Node::Param { x, .. } | Node::RmsNorm { x, .. } => vec![x],
        Node::Attention { q, k, v, .. } => vec![q, k, v, i],
        Node::Glu { gate, up, .. } => vec![gate, up],
        _ => vec![],
    }
}

/// The buffers of an engine's plans: free ones by size, a request taking the smallest that
/// holds it. The plans share them (they never run at once, and every run writes a buffer
/// before it reads it), so a new shape adds only what its step needs beyond the largest
/// before it.
#[derive(Debug, Default)]
pub(crate) struct Pool {
    all: Vec<GpuTensor>,
    free: Vec<GpuTensor>,
    bytes: u64,
    /// The tokens of the step being built (for the error of one that does not fit).
    tokens: usize,
}

impl Pool {
    /// Bytes of every buffer made.
    pub(crate) fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Every buffer free again: a plan was built, and the next one may use them all.
    fn reset(&mut self) {
        self.free = self.all.clone();
    }

    fn take(&mut self, gpu: &Gpu, n: usize) -> Result<GpuTensor> {
        let bytes = (n.max(1) * 4) as u64;
        let limit = gpu.max_binding_bytes();
        if bytes > limit {
            return Err(FinetuneError::StepTooLarge {
                tokens: self.tokens,
                what: format!("an activation of {bytes} bytes, over the {limit} one binding holds"),
            });
        }
        let fit = self
            .free
            .iter()
            .enumerate()
            .filter(|(_, t)| t.len() >= n)
            .min_by_key(|(_, t)| t.len())
            .map(|(i, _)| i);
        if let Some(i) = fit {
            return Ok(self.free.swap_remove(i));
        }
        let t = gpu
            .allocate("a training step's activation", bytes, || {
                GpuTensor::zeros(gpu, &[n.max(1)], Dtype::F32)
            })
            .map_err(|e| match e.is_out_of_memory() {
                true => FinetuneError::StepTooLarge {
                    tokens: self.tokens,
                    what: format!("{} more bytes of activations: {e}", self.bytes + bytes),
                },
                false => gpu_err("allocating a training step")(e).into(),
            })?;
        self.bytes += t.bytes();
        self.all.push(t.clone());
        Ok(t)
    }

    fn give(&mut self, t: GpuTensor) {
        self.free.push(t);
    }
}

/// The lowering of one recording.
struct Lower<'a> {
    gpu: &'a Gpu,
    tensor_cores: bool,
    head_chunk_bytes: usize,
    nodes: &'a [Node],
    shapes: &'a [[usize; 2]],
    params: &'a ParamBindings<'a>,
    ops: StepBuilder,
    pool: &'a mut Pool,
    /// Each forward value's buffer while it lives.
    values: Vec<Option<GpuTensor>>,
    /// Attention nodes' log-sum-exp, kept for their backward.
    lse: HashMap<ValueId, GpuTensor>,
    /// Dropped-out products' masked inputs, kept for their backward.
    masked: HashMap<ValueId, GpuTensor>,
    /// Every dropout op and its product's node (the seed of its mask).
    dropout_ops: Vec<(OpId, ValueId)>,
    /// A training step (dropout applies).
    train: bool,
    /// Each value's gradient while it is being gathered.
    grads: Vec<Option<GpuTensor>>,
    /// Readers left of each value: forward ops, then backward ops.
    readers: Vec<usize>,
    ids: Vec<GpuTensor>,
    starts: Vec<(usize, GpuTensor)>,
}

fn err(what: &'static str) -> impl FnOnce(GpuError) -> ModelError {
    gpu_err(format!("building the training step ({what})"))
}

/// Builds the step of `tape`'s recording, whose logits are value `logits`: with `train`,
/// forward, loss and backward; without, the forward and the loss.
pub(crate) fn build(
    tape: &GpuTape,
    logits: ValueId,
    params: &ParamBindings<'_>,
    pool: &mut Pool,
    train: bool,
) -> Result<Plan> {
    let (gpu, nodes, shapes) = (&*tape.gpu, &tape.nodes[..], &tape.shapes[..]);
    let n = shapes[logits][0];
    pool.tokens = n;
    let head = head(nodes, logits)?;
    let trainable = trainable(nodes);
    let mut readers = vec![0usize; nodes.len()];
    for (i, node) in nodes.iter().enumerate() {
        if head.nodes.contains(&i) {
            continue;
        }
        for x in node.inputs() {
            readers[x] += 1;
        }
        if train && trainable[i] {
            for x in captures(nodes, i) {
                readers[x] += 1;
            }
        }
    }
    readers[head.x] += 1;
    let ids = (0..tape.ids.len())
        .map(|_| GpuTensor::zeros(gpu, &[n], Dtype::U32))
        .collect();
    let mut lower = Lower {
        gpu,
        tensor_cores: tape.tensor_cores,
        head_chunk_bytes: tape.head_chunk_bytes,
        nodes,
        shapes,
        params,
        ops: StepBuilder::new(),
        pool,
        values: vec![None; nodes.len()],
        lse: HashMap::new(),
        masked: HashMap::new(),
        dropout_ops: Vec::new(),
        train,
        grads: vec![None; nodes.len()],
        readers,
        ids,
        starts: Vec::new(),
    };
    for i in 0..nodes.len() {
        if !head.nodes.contains(&i) {
            lower.forward(i)?;
        }
    }
    let targets = GpuTensor::zeros(gpu, &[n], Dtype::U32);
    let loss = GpuTensor::zeros(gpu, &[n], Dtype::F32);
    let loss_ops = lower.head(&head, n, &targets, &loss, train && trainable[head.x])?;
    if train {
        for i in (0..nodes.len()).rev() {
            if let Some(dy) = lower.grads[i].take() {
                lower.backward(i, dy, &trainable)?;
            }
        }
    }
    let step = lower.ops.build(gpu);
    lower.pool.reset();
    Ok(Plan {
        step,
        ids: lower.ids,
        starts: lower.starts,
        targets,
        loss,
        loss_ops,
        dropout_ops: lower.dropout_ops,
        readback: Readback::new(gpu, (n * 4) as u64),
    })
}

impl Lower<'_> {
    fn len(&self, v: ValueId) -> usize {
        let [r, c] = self.shapes[v];
        r * c
    }

    fn value(&self, v: ValueId) -> &GpuTensor {
        self.values[v]
            .as_ref()
            .expect("a value read after its last reader")
    }

    fn push(&mut self, op: std::result::Result<Op, GpuError>, what: &'static str) -> Result<OpId> {
        Ok(self.ops.push(op.map_err(err(what))?))
    }

    fn extend(
        &mut self,
        ops: std::result::Result<Vec<Op>, GpuError>,
        what: &'static str,
    ) -> Result<()> {
        self.ops.extend(ops.map_err(err(what))?);
        Ok(())
    }

    /// One reader of `v` done: its buffer goes back to the pool after the last.
    fn read_done(&mut self, v: ValueId) {
        self.readers[v] -= 1;
        if self.readers[v] == 0 {
            if let Some(t) = self.values[v].take() {
                self.pool.give(t);
            }
            if let Some(t) = self.lse.remove(&v) {
                self.pool.give(t);
            }
        }
    }

    /// The `start[]` buffer of id list `positions`.
    fn start(&mut self, positions: usize) -> GpuTensor {
        if let Some((_, t)) = self.starts.iter().find(|(p, _)| *p == positions) {
            return t.clone();
        }
        let t = GpuTensor::zeros(self.gpu, &[self.ids[positions].len()], Dtype::U32);
        self.starts.push((positions, t.clone()));
        t
    }

    fn matmul(&self, rows: usize, tensor_cores: bool) -> Matmul {
        Matmul {
            n_tokens: rows,
            strides: Strides::default(),
            tensor_cores,
        }
    }

    fn forward(&mut self, i: usize) -> Result<()> {
        let gpu = self.gpu;
        let out = self.pool.take(gpu, self.len(i))?;
        let (rows, len) = (self.shapes[i][0], self.len(i));
        let caps = &gpu.caps;
        let o = View::from(&out);
        match &self.nodes[i] {
            Node::Embed { table, ids } => {
                let ops = embed::embed_rows(table, (&self.ids[*ids]).into(), rows, o, 1.0);
                self.extend(ops, "embedding")?;
            }
            Node::Matmul { w, x } => {
                let ops = self.matmul(rows, self.tensor_cores).ops(
                    caps,
                    w,
                    self.value(*x).into(),
                    None,
                    o,
                );
                self.extend(ops, "product")?;
            }
            &Node::Param {
                id,
                scale,
                dropout,
                x,
            } => {
                // In a training step, the product reads x through dropout's mask, whose
                // seed the engine sets each step; the masked copy stays for the backward.
                let masked = match self.train && dropout > 0.0 {
                    true => {
                        let n = self.len(x);
                        let t = self.pool.take(gpu, n)?;
                        self.push(
                            elementwise::copy(self.value(x).into(), (&t).into(), n),
                            "dropout",
                        )?;
                        let op =
                            self.push(dropout::dropout((&t).into(), n, dropout, 0), "dropout")?;
                        self.dropout_ops.push((op, i));
                        Some(t)
                    }
                    false => None,
                };
                let input = masked.as_ref().unwrap_or_else(|| self.value(x));
                let w = &self.params.weights[id];
                let ops = self
                    .matmul(rows, self.tensor_cores)
                    .ops(caps, w, input.into(), None, o);
                self.extend(ops, "adapter product")?;
                if let Some(t) = masked {
                    self.masked.insert(i, t);
                }
                if scale != 1.0 {
                    self.push(unary::scale(o, len, scale), "adapter scale")?;
                }
            }
            Node::AddBias { x, bias } => {
                self.push(elementwise::copy(self.value(*x).into(), o, len), "bias")?;
                let cols = self.shapes[i][1];
                self.push(
                    elementwise::add_rows(o, (&**bias).into(), rows, cols),
                    "bias",
                )?;
            }
            Node::RmsNorm { x, norm, gain } => {
                let op = norm.op(self.value(*x).into(), o, gain.as_deref());
                self.push(op, "norm")?;
            }
            Node::Rope {
                x,
                rope,
                positions,
                freqs,
            } => {
                self.push(elementwise::copy(self.value(*x).into(), o, len), "rope")?;
                let op = rope.op(o, (&self.ids[*positions]).into(), freqs);
                self.push(op, "rope")?;
            }
            Node::Attention {
                q,
                k,
                v,
                attn,
                positions,
            } => {
                let lse = self.pool.take(gpu, attn.n * attn.n_head)?;
                let start = self.start(*positions);
                let op = attn.forward_op(TrainAttentionForward {
                    q: self.value(*q).into(),
                    k: self.value(*k).into(),
                    v: self.value(*v).into(),
                    start: (&start).into(),
                    o,
                    lse: (&lse).into(),
                });
                self.push(op, "attention")?;
                self.lse.insert(i, lse);
            }
            Node::Glu { gate, up, act } => {
                let op = glu::glu(
                    *act,
                    self.value(*gate).into(),
                    self.value(*up).into(),
                    o,
                    len,
                );
                self.push(op, "glu")?;
            }
            Node::Add { a, b } => {
                self.push(elementwise::copy(self.value(*a).into(), o, len), "add")?;
                self.push(
                    elementwise::add_inplace(o, self.value(*b).into(), len),
                    "add",
                )?;
            }
            Node::Scale { x, s } => {
                self.push(elementwise::copy(self.value(*x).into(), o, len), "scale")?;
                self.push(unary::scale(o, len, *s), "scale")?;
            }
            Node::Softcap { x, cap } => {
                self.push(elementwise::copy(self.value(*x).into(), o, len), "softcap")?;
                self.push(unary::softcap(o, len, *cap), "softcap")?;
            }
            Node::Rows { x, start } => {
                let from = View::at(self.value(*x), start * self.shapes[i][1]);
                self.push(elementwise::copy(from, o, len), "rows")?;
            }
        }
        self.values[i] = Some(out);
        if self.readers[i] == 0 {
            // Nothing reads it (a value the graph made and left).
            self.readers[i] = 1;
            self.read_done(i);
        }
        for x in self.nodes[i].inputs() {
            self.read_done(x);
        }
        Ok(())
    }

    /// The LM head and the loss, in chunks of rows: each chunk's logits, their
    /// cross-entropy (the gradient written over them) and, with `backward`, the head's
    /// input gradient from them.
    fn head(
        &mut self,
        head: &Head<'_>,
        n: usize,
        targets: &GpuTensor,
        loss: &GpuTensor,
        backward: bool,
    ) -> Result<Vec<OpId>> {
        let gpu = self.gpu;
        let vocab = head.w.shape.n_out;
        let d = head.w.shape.n_in;
        let limit = (gpu.max_binding_bytes() as usize).min(self.head_chunk_bytes);
        let chunk = (limit / (vocab * 4)).clamp(1, n);
        let logits = self.pool.take(gpu, chunk * vocab)?;
        let dx = match backward {
            true => Some(self.pool.take(gpu, n * d)?),
            false => None,
        };
        // The vocabulary is the head gradient's long sum, split over (at most this many
        // slices a chunk of rows: every weight chunk its own).
        let slices = splits(tiles(d), vocab) * head.w.chunks.len();
        let scratch = match backward {
            true => Some(self.pool.take(gpu, slices * chunk * d)?),
            false => None,
        };
        let mut loss_ops = Vec::new();
        for c0 in (0..n).step_by(chunk) {
            let rows = chunk.min(n - c0);
            let x = View::at(self.value(head.x), c0 * d);
            let ops = self.matmul(rows, self.tensor_cores).ops(
                &gpu.caps,
                head.w,
                x,
                None,
                (&logits).into(),
            );
            self.extend(ops, "LM head")?;
            let ce = CrossEntropy {
                n: rows,
                vocab,
                softcap: head.softcap,
                weight: 1.0,
            };
            let op = ce.op((&logits).into(), View::at(targets, c0), View::at(loss, c0));
            loss_ops.push(self.push(op, "cross-entropy")?);
            if let (Some(dx), Some(scratch)) = (&dx, &scratch) {
                let grad = MatmulInputGrad {
                    n_tokens: rows,
                    strides: Strides::default(),
                    accumulate: false,
                    tensor_cores: self.tensor_cores,
                };
                let split = splits(tiles(d) * tiles(rows), vocab);
                let (w, dy) = (head.w.all_rows(), (&logits).into());
                let ops = grad.split_ops(
                    &gpu.caps,
                    w,
                    dy,
                    scratch.into(),
                    split,
                    View::at(dx, c0 * d),
                );
                self.extend(ops, "LM head gradient")?;
            }
        }
        self.pool.give(logits);
        if let Some(t) = scratch {
            self.pool.give(t);
        }
        self.read_done(head.x);
        self.grads[head.x] = dx;
        Ok(loss_ops)
    }

    /// Adds gradient `g` into value `x`'s: it becomes it where `x` has none yet (`owned`:
    /// `g` is the caller's to give; otherwise a copy), else it is added and, if owned,
    /// handed back.
    fn give_grad(
        &mut self,
        x: ValueId,
        g: GpuTensor,
        owned: bool,
        trainable: &[bool],
    ) -> Result<()> {
        let len = self.len(x);
        if !trainable[x] {
            if owned {
                self.pool.give(g);
            }
            return Ok(());
        }
        match &self.grads[x] {
            None if owned => self.grads[x] = Some(g),
            None => {
                let t = self.pool.take(self.gpu, len)?;
                self.push(
                    elementwise::copy((&g).into(), (&t).into(), len),
                    "gradient copy",
                )?;
                self.grads[x] = Some(t);
            }
            Some(acc) => {
                let op = elementwise::add_inplace(acc.into(), (&g).into(), len);
                self.push(op, "gradient sum")?;
                if owned {
                    self.pool.give(g);
                }
            }
        }
        Ok(())
    }

    /// `dx (+)= dy · W` into `x`'s gradient, for a product by `w` (all its rows).
    fn input_grad(
        &mut self,
        w: &GpuWeight,
        dy: &GpuTensor,
        x: ValueId,
        rows: usize,
        tensor_cores: bool,
    ) -> Result<()> {
        let accumulate = self.grads[x].is_some();
        if !accumulate {
            let t = self.pool.take(self.gpu, self.len(x))?;
            self.grads[x] = Some(t);
        }
        let dx = self.grads[x].clone().expect("made above");
        self.input_grad_into(w, dy, &dx, accumulate, rows, tensor_cores)
    }

    /// `dx (+)= dy · W` for `rows` rows, its sum over W's rows split where the output has
    /// few tiles ([`splits`]).
    fn input_grad_into(
        &mut self,
        w: &GpuWeight,
        dy: &GpuTensor,
        dx: &GpuTensor,
        accumulate: bool,
        rows: usize,
        tensor_cores: bool,
    ) -> Result<()> {
        let n_in = w.shape.n_in;
        let split = splits(tiles(n_in) * tiles(rows), w.shape.n_out);
        let grad = MatmulInputGrad {
            n_tokens: rows,
            strides: Strides::default(),
            accumulate,
            tensor_cores,
        };
        let scratch = match split {
            1 => None,
            _ => Some(
                self.pool
                    .take(self.gpu, w.chunks.len() * split * rows * n_in)?,
            ),
        };
        let caps = &self.gpu.caps;
        let ops = match &scratch {
            None => grad.ops(caps, w.all_rows(), dy.into(), dx.into()),
            Some(t) => grad.split_ops(caps, w.all_rows(), dy.into(), t.into(), split, dx.into()),
        };
        self.extend(ops, "input gradient")?;
        if let Some(t) = scratch {
            self.pool.give(t);
        }
        Ok(())
    }

    /// Node `i`'s backward from its output's gradient `dy` (the caller's to give).
    fn backward(&mut self, i: usize, dy: GpuTensor, trainable: &[bool]) -> Result<()> {
        let gpu = self.gpu;
        let rows = self.shapes[i][0];
        let len = self.len(i);
        let mut dy = Some(dy);
        match &self.nodes[i] {
            Node::Embed { .. } => {}
            Node::Matmul { w, x } => {
                if trainable[*x] {
                    let dy = dy.as_ref().expect("held");
                    self.input_grad(w, dy, *x, rows, self.tensor_cores)?;
                }
            }
            &Node::Param {
                id,
                scale,
                dropout,
                x,
            } => {
                let dy_ref = dy.as_ref().expect("held");
                let scaled = if scale != 1.0 {
                    let t = self.pool.take(gpu, len)?;
                    self.push(
                        elementwise::copy(dy_ref.into(), (&t).into(), len),
                        "adapter scale",
                    )?;
                    self.push(unary::scale((&t).into(), len, scale), "adapter scale")?;
                    Some(t)
                } else {
                    None
                };
                let g = scaled.as_ref().unwrap_or(dy_ref).clone();
                let w = &self.params.weights[id];
                let weight_grad = MatmulWeightGrad {
                    n_tokens: rows,
                    n_in: w.shape.n_in,
                    n_out: w.shape.n_out,
                    strides: Strides::default(),
                    accumulate: true,
                };
                let dw = View::at(self.params.grads, self.params.offsets[id]);
                let split = splits(tiles(w.shape.n_out) * tiles(w.shape.n_in), rows);
                let scratch = self.pool.take(gpu, split * w.shape.n_out * w.shape.n_in)?;
                let masked = self.masked.remove(&i);
                let input = masked.as_ref().unwrap_or_else(|| self.value(x));
                let ops =
                    weight_grad.split_ops((&g).into(), input.into(), (&scratch).into(), split, dw);
                self.extend(ops, "adapter gradient")?;
                self.pool.give(scratch);
                match masked {
                    // The product read x ⊙ mask: x's gradient is masked in turn.
                    Some(t) => {
                        if trainable[x] {
                            let dx = self.pool.take(gpu, self.len(x))?;
                            self.input_grad_into(w, &g, &dx, false, rows, self.tensor_cores)?;
                            let n = self.len(x);
                            let op = dropout::dropout((&dx).into(), n, dropout, 0);
                            let op = self.push(op, "dropout backward")?;
                            self.dropout_ops.push((op, i));
                            self.give_grad(x, dx, true, trainable)?;
                        }
                        self.pool.give(t);
                    }
                    None if trainable[x] => self.input_grad(w, &g, x, rows, self.tensor_cores)?,
                    None => {}
                }
                if let Some(t) = scaled {
                    self.pool.give(t);
                }
            }
            &Node::AddBias { x, .. } => {
                let g = dy.take().expect("held");
                self.give_grad(x, g, true, trainable)?;
            }
            &Node::RmsNorm { x, norm, ref gain } => {
                if trainable[x] {
                    let dx = self.pool.take(gpu, self.len(x))?;
                    let dy = dy.as_ref().expect("held");
                    let op = norm.backward_op(
                        self.value(x).into(),
                        dy.into(),
                        (&dx).into(),
                        gain.as_deref(),
                    );
                    self.push(op, "norm backward")?;
                    self.give_grad(x, dx, true, trainable)?;
                }
            }
            &Node::Rope {
                x,
                rope,
                positions,
                ref freqs,
            } => {
                let g = dy.take().expect("held");
                let op = rope.backward_op((&g).into(), (&self.ids[positions]).into(), freqs);
                self.push(op, "rope backward")?;
                self.give_grad(x, g, true, trainable)?;
            }
            &Node::Attention {
                q,
                k,
                v,
                attn,
                positions,
            } => {
                let dq = self.pool.take(gpu, self.len(q))?;
                let dk = self.pool.take(gpu, self.len(k))?;
                let dv = self.pool.take(gpu, self.len(v))?;
                let start = self.start(positions);
                let lse = self.lse.get(&i).expect("kept for the backward");
                let ops = attn.backward_ops(TrainAttentionBackward {
                    q: self.value(q).into(),
                    k: self.value(k).into(),
                    v: self.value(v).into(),
                    o: self.value(i).into(),
                    lse: lse.into(),
                    d_o: dy.as_ref().expect("held").into(),
                    start: (&start).into(),
                    dq: (&dq).into(),
                    dk: (&dk).into(),
                    dv: (&dv).into(),
                });
                self.extend(ops, "attention backward")?;
                self.give_grad(q, dq, true, trainable)?;
                self.give_grad(k, dk, true, trainable)?;
                self.give_grad(v, dv, true, trainable)?;
            }
            &Node::Glu { gate, up, act } => {
                let dg = self.pool.take(gpu, len)?;
                let du = self.pool.take(gpu, len)?;
                let op = glu_backward(
                    act,
                    GluBackward {
                        gate: self.value(gate).into(),
                        up: self.value(up).into(),
                        dy: dy.as_ref().expect("held").into(),
                        dgate: (&dg).into(),
                        dup: (&du).into(),
                    },
                    len,
                );
                self.push(op, "glu backward")?;
                self.give_grad(gate, dg, true, trainable)?;
                self.give_grad(up, du, true, trainable)?;
            }
            &Node::Add { a, b } => {
                let g = dy.take().expect("held");
                self.give_grad(b, g.clone(), false, trainable)?;
                self.give_grad(a, g, true, trainable)?;
            }
            &Node::Scale { x, s } => {
                let g = dy.take().expect("held");
                self.push(unary::scale((&g).into(), len, s), "scale backward")?;
                self.give_grad(x, g, true, trainable)?;
            }
            Node::Softcap { .. } | Node::Rows { .. } => {
                return Err(ModelError::Unsupported(
                    "the backward of a soft-cap or a row slice inside the graph".into(),
                )
                .into());
            }
        }
        if let Some(g) = dy {
            self.pool.give(g);
        }
        for x in captures(self.nodes, i) {
            self.read_done(x);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A buffer past what one binding holds is the step's error (naming its tokens), not a
    /// validation panic when the step binds it.
    #[test]
    fn an_activation_past_the_binding_limit_is_a_typed_error() {
        if std::env::var_os("RULLAMA_NO_GPU_TESTS").is_some() {
            return;
        }
        let gpu = Gpu::open().expect("a GPU adapter (lavapipe will do)");
        let mut pool = Pool {
            tokens: 123_456,
            ..Pool::default()
        };
        let too_many = (gpu.max_binding_bytes() / 4 + 1) as usize;
        match pool.take(&gpu, too_many) {
            Err(FinetuneError::StepTooLarge { tokens, what }) => {
                assert_eq!(tokens, 123_456);
                assert!(what.contains("one binding holds"), "{what}");
            }
            other => panic!("expected StepTooLarge, got {other:?}"),
        }
        assert_eq!(pool.bytes(), 0, "nothing was allocated");
        assert!(pool.take(&gpu, 16).is_ok());
    }
}
