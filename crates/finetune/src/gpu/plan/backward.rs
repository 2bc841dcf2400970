//! The backward of a recorded step: each node's backward kernels, in reverse, from its
//! output's gradient to its inputs' and the adapter's.

use rullama_kernels::ops::attention_backward::TrainAttentionBackward;
use rullama_kernels::ops::glu_backward::{GluBackward, glu_backward};
use rullama_kernels::ops::matmul::Strides;
use rullama_kernels::ops::matmul_input_grad::MatmulInputGrad;
use rullama_kernels::ops::matmul_thin::{MatmulThin, ThinWeight};
use rullama_kernels::ops::matmul_weight_grad::MatmulWeightGrad;
use rullama_kernels::ops::{dropout, elementwise, unary};
use rullama_kernels::{GpuTensor, GpuWeight, View};
use rullama_model::ModelError;

use super::{
    Lower, MIN_SPLIT_SUM, attention_splits, captures, split_count, splits, thin_matrix, tiles,
};
use crate::error::Result;
use crate::gpu::record::{Node, ValueId};

impl Lower<'_> {
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
    fn input_grad(&mut self, w: &GpuWeight, dy: &GpuTensor, x: ValueId, rows: usize) -> Result<()> {
        let accumulate = self.grads[x].is_some();
        if !accumulate {
            let t = self.pool.take(self.gpu, self.len(x))?;
            self.grads[x] = Some(t);
        }
        let dx = self.grads[x].clone().expect("made above");
        self.input_grad_into(w, dy, (&dx).into(), accumulate, rows)
    }

    /// `dx (+)= dy · W` for `rows` rows (the LM head's: the vocabulary), its sum over W's
    /// rows split where the output has few tiles ([`splits`]), on the tensor cores where the
    /// step uses them.
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
        let split = splits(tiles(n_in) * tiles(rows), w.shape.n_out);
        let grad = MatmulInputGrad {
            n_tokens: rows,
            strides: Strides::default(),
            accumulate,
            tensor_cores: self.tensor_cores,
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

    /// Node `i`'s backward from its output's gradient `dy` (the caller's to give).
    pub(super) fn backward(&mut self, i: usize, dy: GpuTensor, trainable: &[bool]) -> Result<()> {
        let gpu = self.gpu;
        let rows = self.shapes[i][0];
        let len = self.len(i);
        let mut dy = Some(dy);
        match &self.nodes[i] {
            Node::Embed { .. } => {}
            Node::Matmul { w, x } => {
                if trainable[*x] {
                    let dy = dy.as_ref().expect("held");
                    self.input_grad(w, dy, *x, rows)?;
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
                let split = split_count(weight_grad.workgroups(), rows / MIN_SPLIT_SUM);
                let len = match split {
                    1 => 0,
                    _ => split * w.shape.n_out * w.shape.n_in,
                };
                let masked = self.masked.remove(&i);
                self.extend_with_scratch(len, "adapter gradient", |l, scratch| {
                    let input = masked.as_ref().unwrap_or_else(|| l.value(x));
                    match scratch {
                        None => weight_grad.ops((&g).into(), input.into(), dw),
                        Some(t) => weight_grad.split_ops((&g).into(), input.into(), t, split, dw),
                    }
                })?;
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
                            self.give_grad(x, dx, true, trainable)?;
                        }
                        self.pool.give(t);
                    }
                    None if trainable[x] => self.input_grad(w, &g, x, rows)?,
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
                let splits = attention_splits(&attn);
                let d_o = dy.as_ref().expect("held");
                let len = attn.backward_scratch_len(splits);
                self.extend_with_scratch(len, "attention backward", |l, scratch| {
                    let backward = TrainAttentionBackward {
                        q: l.value(q).into(),
                        k: l.value(k).into(),
                        v: l.value(v).into(),
                        o: l.value(i).into(),
                        lse: l.lse.get(&i).expect("kept for the backward").into(),
                        d_o: d_o.into(),
                        start: (&start).into(),
                        dq: (&dq).into(),
                        dk: (&dk).into(),
                        dv: (&dv).into(),
                    };
                    attn.backward_ops_on(&l.gpu.caps, l.tensor_cores, backward, scratch, splits)
                })?;
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
