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
use std::rc::Rc;

use rullama_kernels::ops::attention_backward::BackwardSplits;
use rullama_kernels::ops::attention_train::TrainAttention;
use rullama_kernels::ops::matmul::{Matmul, Strides};
use rullama_kernels::ops::matmul_dense::{self, DenseRoute, DenseScratch, DenseTile};
use rullama_kernels::ops::matmul_input_grad::InputGradTile;
use rullama_kernels::ops::matmul_thin::{MatmulThin, ThinWeight};
use rullama_kernels::ops::split::Out;
use rullama_kernels::{
    Dtype, Gpu, GpuError, GpuFormat, GpuTensor, GpuWeight, Op, OpId, Readback, Step, StepBuilder,
    View, WeightShape,
};
use rullama_model::ModelError;

use crate::error::Result;

use super::gpu_err;
use super::record::{GpuTape, Node, ValueId};
use forward::head;
pub(crate) use pool::Pool;

mod backward;
mod forward;
mod pool;

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

/// A gradient buffer, which may be the gradient of several values at once (an Add's inputs
/// both get its output's): a kernel writes over it only where it is the one hold
/// ([`Rc::try_unwrap`]), and it goes back to the pool after the last.
type Grad = Rc<GpuTensor>;

/// A LoRA pair's weight gradients summed by one split sum: B's partials, in a scratch whose
/// slices hold A's and then B's (`b_len` values), wait for A's backward.
struct PairSum {
    scratch: GpuTensor,
    b_len: usize,
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

/// The fewest tokens of a training step whose frozen products take the dense tensor-core
/// kernel over an f16 copy of each weight, made for the product (a pass over the weight,
/// repaid by the larger tiles once the step has thousands of tokens; inference's threshold,
/// `DENSE_MIN_TOKENS` with a floor on the weight's size, is set for a prompt of hundreds).
const DENSE_MIN_ROWS: usize = 2048;

/// A split product aims at about this many workgroups (8 an SM of an H100), in at most
/// [`MAX_SPLITS`] splits of at least [`MIN_SPLIT_SUM`] terms each.
const TARGET_WORKGROUPS: usize = 1024;
const MAX_SPLITS: usize = 16;
const MIN_SPLIT_SUM: usize = 64;

/// The tensor-core attention forward's and dq pass's workgroups (64 (row, head) pairs on 256
/// invocations: four of the f32 kernels' 32-pair tiles' products, with registers for one or
/// two an SM of an H100, 132 of them) aim at about this many: a block with fewer pair tiles (a
/// short batch) splits their keys to fill the device; a longer one does not pay the combine
/// (the forward) or the split sum (dq).
const COOP_PAIR_TARGET_WORKGROUPS: usize = 256;

/// The tensor-core input gradient's 128-input tiles ([`InputGradTile::Large`], or
/// [`InputGradTile::Wide`] for a block of at most 64 tokens) aim at about this many workgroups,
/// with their rows split at most [`WIDE_MAX_SPLITS`] ways: each is four 64 x 64 tiles' work on
/// 256 invocations with 43 KB of workgroup memory, of which an SM of an H100 (132 of them)
/// holds about two at once. A product whose grid cannot reach it takes the 64 x 64 tile.
const WIDE_TARGET_WORKGROUPS: usize = 256;
const WIDE_MAX_SPLITS: usize = 32;

/// How many ways to split a product of `tiles` output tiles whose sums run over `sum_len`
/// terms: enough workgroups to fill the device where the output alone would not.
fn splits(tiles: usize, sum_len: usize) -> usize {
    split_count(tiles, sum_len / MIN_SPLIT_SUM)
}

/// The tile and splits of an input gradient over `n_in` inputs x `rows` tokens summed over
/// `sum_len` weight rows, on the tensor cores (`coop`) or not: a 128-input tile where its
/// grid, split into at most [`WIDE_MAX_SPLITS`] of at least [`MIN_SPLIT_SUM`] rows, makes
/// [`WIDE_TARGET_WORKGROUPS`] (the LM head's: 5 x 2 tiles of a 256-token chunk, 26 splits),
/// else 64 x 64 (the f32 kernel's only tile) split as the other products ([`splits`]).
fn input_grad_tiling(
    n_in: usize,
    rows: usize,
    sum_len: usize,
    coop: bool,
) -> (InputGradTile, usize) {
    if coop {
        let wide = match rows <= 64 {
            true => InputGradTile::Wide,
            false => InputGradTile::Large,
        };
        let grid = wide.workgroups(n_in, rows);
        let split = WIDE_TARGET_WORKGROUPS
            .div_ceil(grid.max(1))
            .min(WIDE_MAX_SPLITS)
            .min(sum_len / MIN_SPLIT_SUM)
            .max(1);
        if grid * split >= WIDE_TARGET_WORKGROUPS {
            return (wide, split);
        }
    }
    let small = InputGradTile::Small;
    (small, splits(small.workgroups(n_in, rows), sum_len))
}

/// Splits that bring `workgroups` up to [`TARGET_WORKGROUPS`], at most [`MAX_SPLITS`] and at
/// most `most` (past which a split would have nothing to sum), at least 1.
fn split_count(workgroups: usize, most: usize) -> usize {
    let want = (TARGET_WORKGROUPS / workgroups.max(1)).clamp(1, MAX_SPLITS);
    want.min(most).max(1)
}

/// How the attention forward and the backward's dq pass split each pair tile's keys (they walk
/// the same tiles): on the tensor cores, their 64-pair tiles up to
/// [`COOP_PAIR_TARGET_WORKGROUPS`]; in f32 the f32 kernels' 32-pair tiles up to
/// [`TARGET_WORKGROUPS`]; no more splits than there are key tiles to share.
fn pair_key_splits(attn: &TrainAttention, coop: bool) -> usize {
    match coop {
        true => (COOP_PAIR_TARGET_WORKGROUPS / attn.coop_pair_workgroups().max(1))
            .clamp(1, MAX_SPLITS)
            .min(attn.dq_key_tiles()),
        false => split_count(attn.dq_workgroups(), attn.dq_key_tiles()),
    }
}

/// How the attention backward splits its passes' sums (`coop`: on the tensor cores): enough
/// workgroups to fill the device (a short block has few tiles, and a sequence's first key
/// tile is seen by all its rows, its last pair tile sees all its keys), no more splits than
/// there are tiles to share.
fn attention_splits(attn: &TrainAttention, coop: bool) -> BackwardSplits {
    BackwardSplits {
        dq: pair_key_splits(attn, coop),
        dkdv: split_count(attn.dkdv_workgroups(), attn.dkdv_pair_tiles()),
    }
}

/// An f32 matrix with a side of at most 16 (an adapter's A or B) as a tensor over its one
/// buffer (an F32 matrix's GPU layout is its values as they are), for the thin products
/// (`MatmulThin`: exact f32, bound by the bytes of the wide side); `None` for any other weight.
fn thin_matrix(w: &GpuWeight) -> Option<GpuTensor> {
    let s = w.shape;
    match &w.chunks[..] {
        [c] if s.format == GpuFormat::F32 && MatmulThin::fits(s.n_out, s.n_in) => Some(GpuTensor {
            buf: c.buf.clone(),
            shape: vec![s.n_out * s.n_in],
            dtype: Dtype::F32,
        }),
        _ => None,
    }
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
    grads: Vec<Option<Grad>>,
    /// LoRA pairs' B partial weight gradients waiting for A's, by A's node.
    pair_sums: HashMap<ValueId, PairSum>,
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
        pair_sums: HashMap::new(),
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
    debug_assert!(
        lower.pair_sums.is_empty(),
        "a LoRA B's partials left unsummed"
    );
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

    /// The forward product over `rows` tokens, on the tensor cores where the step uses them.
    /// Adds the ops `build` makes, given a scratch of `len` f32 for a split op's partial sums
    /// (none for 0), the scratch taken from the pool's and given back once the ops exist.
    fn extend_with_scratch(
        &mut self,
        len: usize,
        what: &'static str,
        build: impl FnOnce(&Self, Option<View<'_>>) -> std::result::Result<Vec<Op>, GpuError>,
    ) -> Result<()> {
        let scratch = match len {
            0 => None,
            len => Some(self.pool.take_scratch(self.gpu, len)?),
        };
        let ops = build(self, scratch.as_ref().map(View::from));
        if let Some(t) = scratch {
            self.pool.give_scratch(t);
        }
        self.extend(ops, what)
    }

    /// `o = x Wᵀ` over `rows` tokens (all of w's rows), the product's inputs split where it
    /// has few output tiles (`Matmul::split_k`, on the tensor cores: an adapter's A, its rank's
    /// rows over every token of the step), the partial sums in a scratch.
    fn product(
        &mut self,
        w: &GpuWeight,
        x: &GpuTensor,
        o: View<'_>,
        rows: usize,
        what: &'static str,
    ) -> Result<()> {
        if let Some(matrix) = thin_matrix(w) {
            let thin = MatmulThin {
                n_tokens: rows,
                n_in: w.shape.n_in,
                n_out: w.shape.n_out,
                weight: ThinWeight::Rows,
                a_stride: None,
                y_stride: None,
                accumulate: false,
            };
            let op = thin.op(x.into(), (&matrix).into(), o);
            self.push(op, what)?;
            return Ok(());
        }
        let m = self.matmul(rows);
        let all = w.all_rows();
        if let Some(tile) = self.dense_tile(w, rows) {
            let outs = [Out::new(o, w.shape.n_out)];
            return self.extend_with_scratch(m.dense_copy_len(all), what, |_, scratch| {
                let copy = scratch.expect("a scratch of the copy's length");
                let scratch = DenseScratch {
                    copy,
                    partials: None,
                };
                m.dense_route_ops(DenseRoute::whole(tile), all, x.into(), None, &outs, scratch)
            });
        }
        let split = m.split_k(&self.gpu.caps, all);
        let len = split.map_or(0, |k| m.split_k_scratch(all, k));
        self.extend_with_scratch(len, what, |l, scratch| match split.zip(scratch) {
            Some((k, scratch)) => {
                let outs = [Out::new(o, w.shape.n_out)];
                m.split_k_ops(all, x.into(), None, &outs, scratch, k)
            }
            None => m.ops(&l.gpu.caps, w, x.into(), None, o),
        })
    }

    /// The dense kernel's tile for a frozen weight's product over `rows` tokens where the step
    /// copies the weight to f16 for it (`Matmul::dense_route_ops`): on the tensor cores, a
    /// step of at least [`DENSE_MIN_ROWS`] tokens, rows the dense kernel and one binding take.
    /// The product runs in one dispatch: the prefill's split of few-tile products
    /// (`matmul_dense::dense_splits`) was fit on the prefill's shapes, not a step's.
    fn dense_tile(&self, w: &GpuWeight, rows: usize) -> Option<DenseTile> {
        self.dense_tile_for(w.shape, rows)
    }

    /// [`Lower::dense_tile`] for a weight of shape `s` (its f16 copy: `n_out x n_in` halves).
    fn dense_tile_for(&self, s: WeightShape, rows: usize) -> Option<DenseTile> {
        let dense = rows >= DENSE_MIN_ROWS && self.dense_copy_fits(s);
        dense.then(|| DenseTile::for_shape(s.n_out, rows)).flatten()
    }

    /// Whether an f16 copy of a weight of shape `s` can go to the dense kernel: the step on the
    /// tensor cores, rows of whole units the kernel takes, the copy within one binding.
    fn dense_copy_fits(&self, s: WeightShape) -> bool {
        let fits = (s.n_out * s.n_in * 2) as u64 <= self.gpu.max_binding_bytes();
        self.tensor_cores
            && self.gpu.caps.coop_f16
            && matmul_dense::supports(GpuFormat::F16, s.n_in)
            && fits
    }

    fn matmul(&self, rows: usize) -> Matmul {
        Matmul {
            n_tokens: rows,
            strides: Strides::default(),
            tensor_cores: self.tensor_cores,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The LM head's input gradient over a 256-token chunk (gemma-3-270m: 640 inputs, 262,144
    /// rows) takes the 128 x 128 tile in 26 splits on the tensor cores (5 x 2 x 26 = 260
    /// workgroups) and 64 x 64 in 16 without them; a block of at most 64 tokens takes 128 x
    /// 64 where its grid fills the device (2,560 inputs) and 64 x 64 where it cannot (640);
    /// a product with a short sum keeps 64 x 64 (its splits capped by the rows).
    #[test]
    fn input_grad_tiles() {
        use InputGradTile::{Large, Small, Wide};
        assert_eq!(input_grad_tiling(640, 256, 262_144, true), (Large, 26));
        assert_eq!(input_grad_tiling(640, 256, 262_144, false), (Small, 16));
        assert_eq!(input_grad_tiling(2560, 64, 262_144, true), (Wide, 13));
        assert_eq!(input_grad_tiling(640, 64, 262_144, true), (Small, 16));
        assert_eq!(input_grad_tiling(640, 512, 640, true), (Small, 10));
    }

    /// gemma-3-270m's attention forward and dq pass (4 heads over 1 kv head of 256): a batch
    /// of 8 x 512 tokens has 256 tensor-core tiles of 64 pairs and no split (the f32 kernels'
    /// 512 tiles split 2 ways); one of 512 tokens, 32 tiles split 8 ways (the f32 kernels' 64,
    /// 16).
    #[test]
    fn attention_pair_key_splits() {
        let attn = |n| TrainAttention {
            n,
            n_head: 4,
            n_kv: 1,
            dk: 256,
            dv: 256,
            scale: 0.0625,
            window: 512,
            softcap: 0.0,
        };
        assert_eq!(pair_key_splits(&attn(4096), true), 1);
        assert_eq!(pair_key_splits(&attn(4096), false), 2);
        assert_eq!(pair_key_splits(&attn(512), true), 8);
        assert_eq!(pair_key_splits(&attn(512), false), 16);
    }
}
