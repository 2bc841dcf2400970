//! The backward of a recorded step: each node's backward kernels, in reverse, from its
//! output's gradient to its inputs' and the adapter's.

use std::rc::Rc;

use rullama_kernels::ops::attention_backward::TrainAttentionBackward;
use rullama_kernels::ops::f16_copy::{check_transposable, f16_copy_len, f16_copy_transposed};
use rullama_kernels::ops::glu_backward::{GluBackward, glu_backward};
use rullama_kernels::ops::matmul::Strides;
use rullama_kernels::ops::matmul_dense::DenseTile;
use rullama_kernels::ops::matmul_input_grad::MatmulInputGrad;
use rullama_kernels::ops::matmul_thin::{MatmulThin, ThinWeight};
use rullama_kernels::ops::matmul_weight_grad::MatmulWeightGrad;
use rullama_kernels::ops::split_sum::SplitSum;
use rullama_kernels::ops::unary::UnaryOp;
use rullama_kernels::ops::{dropout, elementwise, unary};
use rullama_kernels::{GpuFormat, GpuTensor, GpuWeight, View, WeightShape};
use rullama_model::ModelError;

use super::{
    Grad, Lower, MIN_SPLIT_SUM, PairSum, attention_splits, captures, err, input_grad_tiling,
    split_count, thin_matrix,
};
use crate::error::Result;
use crate::gpu::record::{Node, ValueId};

impl Lower<'_> {
    /// Gives up one hold of a gradient buffer: after the last, it goes back to the pool.
    fn release(&mut self, g: Grad) {
        if let Ok(t) = Rc::try_unwrap(g) {
            self.pool.give(t);
        }
    }

    /// `g` as a buffer no other value's gradient holds, for a kernel to write over: `g`'s own
    /// where it is the only hold, else a copy of its first `len` values.
    fn own(&mut self, g: Grad, len: usize) -> Result<GpuTensor> {
        match Rc::try_unwrap(g) {
            Ok(t) => Ok(t),
            Err(shared) => {
                let t = self.pool.take(self.gpu, len)?;
                self.push(
                    elementwise::copy((&*shared).into(), (&t).into(), len),
                    "gradient copy",
                )?;
                self.release(shared);
                Ok(t)
            }
        }
    }

    /// `op(g)` with `value`, over `g` where it is the only hold, else into a new buffer.
    fn map_grad(&mut self, op: UnaryOp, g: Grad, len: usize, value: f32) -> Result<Grad> {
        match Rc::try_unwrap(g) {
            Ok(t) => {
                self.push(unary::unary(op, (&t).into(), len, value), "gradient map")?;
                Ok(Rc::new(t))
            }
            Err(shared) => {
                let t = self.pool.take(self.gpu, len)?;
                let op = unary::unary_out(op, (&*shared).into(), (&t).into(), len, value);
                self.push(op, "gradient map")?;
                self.release(shared);
                Ok(Rc::new(t))
            }
        }
    }

    /// Adds gradient `g` into value `x`'s: it becomes it where `x` has none yet (shared, if
    /// another value holds it too: no copy), else the two are summed into whichever of them
    /// only this sum holds (the sum is commutative in f32, so either way gives the same bits),
    /// or into a new buffer where both are shared.
    fn give_grad(&mut self, x: ValueId, g: Grad, trainable: &[bool]) -> Result<()> {
        let len = self.len(x);
        if !trainable[x] {
            self.release(g);
            return Ok(());
        }
        let Some(acc) = self.grads[x].take() else {
            self.grads[x] = Some(g);
            return Ok(());
        };
        let (into, other) = match (Rc::try_unwrap(acc), Rc::try_unwrap(g)) {
            (Ok(acc), Ok(g)) => (acc, Rc::new(g)),
            (Ok(acc), Err(g)) | (Err(g), Ok(acc)) => (acc, g),
            (Err(a), Err(b)) => {
                let t = self.pool.take(self.gpu, len)?;
                let op = elementwise::add((&*a).into(), (&*b).into(), (&t).into(), len);
                self.push(op, "gradient sum")?;
                self.release(a);
                self.release(b);
                self.grads[x] = Some(Rc::new(t));
                return Ok(());
            }
        };
        let op = elementwise::add_inplace((&into).into(), (&*other).into(), len);
        self.push(op, "gradient sum")?;
        self.release(other);
        self.grads[x] = Some(Rc::new(into));
        Ok(())
    }

    /// `dx (+)= dy · W` into `x`'s gradient, for a product by `w` (all its rows).
    fn input_grad(&mut self, w: &GpuWeight, dy: &GpuTensor, x: ValueId, rows: usize) -> Result<()> {
        let len = self.len(x);
        let accumulate = self.grads[x].is_some();
        let dx = match self.grads[x].take() {
            Some(g) => self.own(g, len)?,
            None => self.pool.take(self.gpu, len)?,
        };
        self.input_grad_into(w, dy, (&dx).into(), accumulate, rows)?;
        self.grads[x] = Some(Rc::new(dx));
        Ok(())
    }

    /// `dx (+)= dy · W` for `rows` rows (the LM head's: the vocabulary), its sum over W's
    /// rows split where the output has few tiles, on the tensor cores where the step uses
    /// them, with the tile of [`input_grad_tiling`].
    pub(super) fn input_grad_into(
        &mut self,
        w: &GpuWeight,
        dy: &GpuTensor,
        dx: View<'_>,
        accumulate: bool,
        rows: usize,
    ) -> Result<()> {
        let n_in = w.shape.n_in;
        if let Some(matrix) = thin_matrix(w) {
            let thin = MatmulThin {
                n_tokens: rows,
                n_in: w.shape.n_out,
                n_out: n_in,
                weight: ThinWeight::Transposed,
                a_stride: None,
                y_stride: None,
                accumulate,
            };
            let op = thin.op(dy.into(), (&matrix).into(), dx);
            self.push(op, "input gradient")?;
            return Ok(());
        }
        if let Some(tile) = self.dense_grad_tile(w, rows) {
            return self.dense_input_grad(tile, w, dy, dx, accumulate, rows);
        }
        let coop = self.tensor_cores && self.gpu.caps.coop_f16;
        let (tile, split) = input_grad_tiling(n_in, rows, w.shape.n_out, coop);
        let grad = MatmulInputGrad {
            n_tokens: rows,
            strides: Strides::default(),
            accumulate,
            tensor_cores: self.tensor_cores,
            tile,
        };
        let len = match split {
            1 => 0,
            _ => w.chunks.len() * split * rows * n_in,
        };
        self.extend_with_scratch(len, "input gradient", |l, scratch| {
            let caps = &l.gpu.caps;
            match scratch {
                None => grad.ops(caps, w.all_rows(), dy.into(), dx),
                Some(t) => grad.split_ops(caps, w.all_rows(), dy.into(), t, split, dx),
            }
        })
    }

    /// Adds parameter `id`'s gradient `gᵀ · input` (node `i`'s, over `rows` tokens; `x` the
    /// node's input value) into its slice of the gradient buffer, its sum over the tokens split
    /// where the kernel has few workgroups ([`weight_grad_splits`]). A LoRA pair's B (its input A's product,
    /// their gradients adjacent) whose tokens split as A's leaves its partials in a scratch
    /// beside room for A's, and A's backward (the next node back) adds both with one split sum.
    fn weight_grad(
        &mut self,
        i: ValueId,
        id: usize,
        x: ValueId,
        g: &GpuTensor,
        input: &GpuTensor,
        rows: usize,
    ) -> Result<()> {
        let params = self.params;
        let w = &params.weights[id];
        let grad = weight_grad(w, rows);
        let len = w.shape.n_out * w.shape.n_in;
        let split = weight_grad_splits(&grad);
        let dw = View::at(params.grads, params.offsets[id]);
        if let Some(pair) = self.pair_sums.remove(&i) {
            // A, whose B waits: A's partials first in each slice, then both summed.
            let stride = len + pair.b_len;
            let (mut ops, slices) = grad
                .partial_ops(
                    g.into(),
                    input.into(),
                    (&pair.scratch).into(),
                    split,
                    stride,
                )
                .map_err(err("adapter gradient"))?;
            let sum = SplitSum {
                n_rows: 1,
                n_cols: stride,
                slices,
                out_stride: stride,
                accumulate: true,
            };
            ops.push(
                sum.op((&pair.scratch).into(), dw)
                    .map_err(err("adapter gradient"))?,
            );
            self.pool.give_scratch(pair.scratch);
            return self.extend(Ok(ops), "adapter gradient");
        }
        if let Node::Param { id: a, .. } = self.nodes[x]
            && split > 1
            && a + 1 == id
        {
            let wa = &params.weights[a];
            let a_len = wa.shape.n_out * wa.shape.n_in;
            let a_split = weight_grad_splits(&weight_grad(wa, rows));
            if params.offsets[a] + a_len == params.offsets[id] && a_split == split {
                let stride = a_len + len;
                let scratch = self
                    .pool
                    .take_scratch(self.gpu, grad.slices(split) * stride)?;
                let at = View::at(&scratch, a_len);
                let (ops, _) = grad
                    .partial_ops(g.into(), input.into(), at, split, stride)
                    .map_err(err("adapter gradient"))?;
                self.extend(Ok(ops), "adapter gradient")?;
                let pair = PairSum {
                    scratch,
                    b_len: len,
                };
                self.pair_sums.insert(x, pair);
                return Ok(());
            }
        }
        let scratch_len = match split {
            1 => 0,
            _ => split * len,
        };
        self.extend_with_scratch(
            scratch_len,
            "adapter gradient",
            |_, scratch| match scratch {
                None => grad.ops(g.into(), input.into(), dw),
                Some(t) => grad.split_ops(g.into(), input.into(), t, split, dw),
            },
        )
    }

    /// The dense kernel's tile for `dx = dy · W` as the forward product `dy (Wᵀ)ᵀ` over an
    /// f16 copy of `Wᵀ` (`f16_copy_transposed`), where a step of `rows` tokens takes the dense
    /// route ([`Lower::dense_tile`]'s rule, for `Wᵀ`'s shape) and the copy's layout can hold W
    /// (whole 32-input units, rows in pairs).
    fn dense_grad_tile(&self, w: &GpuWeight, rows: usize) -> Option<DenseTile> {
        let s = w.shape;
        let copies = check_transposable(w).is_ok();
        let transposed = WeightShape {
            format: GpuFormat::F16,
            n_in: s.n_out,
            n_out: s.n_in,
        };
        copies
            .then(|| self.dense_tile_for(transposed, rows))
            .flatten()
    }

    /// `dx (+)= dy · W` on the dense kernel over `Wᵀ` copied to f16 in a scratch (accumulating,
    /// the kernel adds its product into dx).
    fn dense_input_grad(
        &mut self,
        tile: DenseTile,
        w: &GpuWeight,
        dy: &GpuTensor,
        dx: View<'_>,
        accumulate: bool,
        rows: usize,
    ) -> Result<()> {
        let s = w.shape;
        let m = self.matmul(rows);
        let len = f16_copy_len(w.all_rows());
        self.extend_with_scratch(len, "input gradient", |_, scratch| {
            let scratch = scratch.expect("a scratch of the copy's length");
            let mut ops = f16_copy_transposed(w, scratch)?;
            let shape = WeightShape {
                format: GpuFormat::F16,
                n_in: s.n_out,
                n_out: s.n_in,
            };
            let transposed = GpuWeight::in_buffer(shape, scratch.t.buf.clone());
            ops.extend(m.dense_ops_into(tile, &transposed, dy.into(), None, dx, accumulate)?);
            Ok(ops)
        })
    }

    /// Node `i`'s backward from its output's gradient `dy` (one hold of it, the caller's to
    /// give).
    pub(super) fn backward(&mut self, i: usize, dy: Grad, trainable: &[bool]) -> Result<()> {
        let gpu = self.gpu;
        let rows = self.shapes[i][0];
        let len = self.len(i);
        let nodes = self.nodes;
        match &nodes[i] {
            Node::Embed { .. } => self.release(dy),
            Node::Matmul { w, x } => {
                if trainable[*x] {
                    self.input_grad(w, &dy, *x, rows)?;
                }
                self.release(dy);
            }
            &Node::Param {
                id,
                scale,
                dropout,
                x,
            } => {
                let g = if scale == 1.0 {
                    dy
                } else {
                    self.map_grad(UnaryOp::Scale, dy, len, scale)?
                };
                let w = &self.params.weights[id];
                let masked = self.masked.remove(&i);
                let input = masked.clone().unwrap_or_else(|| self.value(x).clone());
                self.weight_grad(i, id, x, &g, &input, rows)?;
                match masked {
                    // The product read x ⊙ mask: x's gradient is masked in turn.
                    Some(t) => {
                        if trainable[x] {
                            let dx = self.pool.take(gpu, self.len(x))?;
                            self.input_grad_into(w, &g, (&dx).into(), false, rows)?;
                            let n = self.len(x);
                            let op = dropout::dropout((&dx).into(), n, dropout, 0);
                            let op = self.push(op, "dropout backward")?;
                            self.dropout_ops.push((op, i));
                            self.give_grad(x, Rc::new(dx), trainable)?;
                        }
                        self.pool.give(t);
                    }
                    None if trainable[x] => self.input_grad(w, &g, x, rows)?,
                    None => {}
                }
                self.release(g);
            }
            &Node::AddBias { x, .. } => self.give_grad(x, dy, trainable)?,
            &Node::RmsNorm { x, norm, ref gain } => {
                if trainable[x] {
                    let dx = self.pool.take(gpu, self.len(x))?;
                    let op = norm.backward_op(
                        self.value(x).into(),
                        (&*dy).into(),
                        (&dx).into(),
                        gain.as_deref(),
                    );
                    self.push(op, "norm backward")?;
                    self.give_grad(x, Rc::new(dx), trainable)?;
                }
                self.release(dy);
            }
            &Node::Rope {
                x,
                rope,
                positions,
                ref freqs,
            } => {
                let g = self.own(dy, len)?;
                let op = rope.backward_op((&g).into(), (&self.ids[positions]).into(), freqs);
                self.push(op, "rope backward")?;
                self.give_grad(x, Rc::new(g), trainable)?;
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
                let coop = attn.uses_tensor_cores(&self.gpu.caps, self.tensor_cores);
                let splits = attention_splits(&attn, coop);
                let len = attn.backward_scratch_len(splits);
                self.extend_with_scratch(len, "attention backward", |l, scratch| {
                    let backward = TrainAttentionBackward {
                        q: l.value(q).into(),
                        k: l.value(k).into(),
                        v: l.value(v).into(),
                        o: l.value(i).into(),
                        lse: l.lse.get(&i).expect("kept for the backward").into(),
                        d_o: (&*dy).into(),
                        start: (&start).into(),
                        dq: (&dq).into(),
                        dk: (&dk).into(),
                        dv: (&dv).into(),
                    };
                    attn.backward_ops_on(&l.gpu.caps, l.tensor_cores, backward, scratch, splits)
                })?;
                self.release(dy);
                self.give_grad(q, Rc::new(dq), trainable)?;
                self.give_grad(k, Rc::new(dk), trainable)?;
                self.give_grad(v, Rc::new(dv), trainable)?;
            }
            &Node::Glu { gate, up, act } => {
                let dg = self.pool.take(gpu, len)?;
                let du = self.pool.take(gpu, len)?;
                let op = glu_backward(
                    act,
                    GluBackward {
                        gate: self.value(gate).into(),
                        up: self.value(up).into(),
                        dy: (&*dy).into(),
                        dgate: (&dg).into(),
                        dup: (&du).into(),
                    },
                    len,
                );
                self.push(op, "glu backward")?;
                self.release(dy);
                self.give_grad(gate, Rc::new(dg), trainable)?;
                self.give_grad(up, Rc::new(du), trainable)?;
            }
            // Both inputs' gradient is dy: one buffer, held by each.
            &Node::Add { a, b } => {
                self.give_grad(b, Rc::clone(&dy), trainable)?;
                self.give_grad(a, dy, trainable)?;
            }
            &Node::Scale { x, s } => {
                let g = self.map_grad(UnaryOp::Scale, dy, len, s)?;
                self.give_grad(x, g, trainable)?;
            }
            Node::Softcap { .. } | Node::Rows { .. } => {
                return Err(ModelError::Unsupported(
                    "the backward of a soft-cap or a row slice inside the graph".into(),
                )
                .into());
            }
        }
        for x in captures(self.nodes, i) {
            self.read_done(x);
        }
        Ok(())
    }
}

/// How many ways a weight gradient's tokens split: until the splits fill the device, by the
/// workgroups of the kernel it runs on (the thin kernels' differ from the tiles').
fn weight_grad_splits(grad: &MatmulWeightGrad) -> usize {
    split_count(grad.workgroups(), grad.n_tokens / MIN_SPLIT_SUM)
}

/// `dW += dyᵀ · x` over `rows` tokens for parameter `w`.
fn weight_grad(w: &GpuWeight, rows: usize) -> MatmulWeightGrad {
    MatmulWeightGrad {
        n_tokens: rows,
        n_in: w.shape.n_in,
        n_out: w.shape.n_out,
        strides: Strides::default(),
        accumulate: true,
    }
}
