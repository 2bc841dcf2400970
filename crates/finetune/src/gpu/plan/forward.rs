//! The forward of a recorded step and its loss head, emitted node by node.

use rullama_kernels::ops::attention_train::TrainAttentionForward;
use rullama_kernels::ops::cross_entropy::CrossEntropy;
use rullama_kernels::ops::{dropout, elementwise, embed, glu, unary};
use rullama_kernels::{GpuTensor, GpuWeight, OpId, View};
use rullama_model::ModelError;

use super::{Lower, attention_splits};
use crate::error::Result;
use crate::gpu::record::{Node, ValueId};

/// What the recording ends in: the LM head `x · Wᵀ` (optionally soft-capped), whose rows
/// the plan runs in chunks with the loss.
pub(super) struct Head<'a> {
    w: &'a GpuWeight,
    /// The head's input (the final norm's output).
    pub(super) x: ValueId,
    softcap: f32,
    /// The nodes the head stands for, which the forward skips.
    pub(super) nodes: Vec<ValueId>,
}

pub(super) fn head<'a>(nodes: &'a [Node], logits: ValueId) -> Result<Head<'a>> {
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

impl Lower<'_> {
    pub(super) fn forward(&mut self, i: usize) -> Result<()> {
        let gpu = self.gpu;
        let out = self.pool.take(gpu, self.len(i))?;
        let (rows, len) = (self.shapes[i][0], self.len(i));
        let o = View::from(&out);
        match &self.nodes[i] {
            Node::Embed { table, ids } => {
                let ops = embed::embed_rows(table, (&self.ids[*ids]).into(), rows, o, 1.0);
                self.extend(ops, "embedding")?;
            }
            Node::Matmul { w, x } => {
                let x = self.value(*x).clone();
                self.product(w, &x, o, rows, "product")?;
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
                let input = masked.clone().unwrap_or_else(|| self.value(x).clone());
                let params = self.params;
                self.product(&params.weights[id], &input, o, rows, "adapter product")?;
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
                // The forward walks the pair tiles as the backward's dq pass does: the same
                // split of their keys.
                let splits = attention_splits(attn).dq;
                let (q, k, v) = (*q, *k, *v);
                self.extend_with_scratch(
                    attn.forward_scratch_len(splits),
                    "attention",
                    |l, scratch| {
                        let forward = TrainAttentionForward {
                            q: l.value(q).into(),
                            k: l.value(k).into(),
                            v: l.value(v).into(),
                            start: (&start).into(),
                            o,
                            lse: (&lse).into(),
                        };
                        // On the tensor cores where the step uses them and the shape fits.
                        attn.forward_ops_on(&l.gpu.caps, l.tensor_cores, forward, scratch, splits)
                    },
                )?;
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
    pub(super) fn head(
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
        let mut loss_ops = Vec::new();
        for c0 in (0..n).step_by(chunk) {
            let rows = chunk.min(n - c0);
            let x = View::at(self.value(head.x), c0 * d);
            let ops = self
                .matmul(rows)
                .ops(&gpu.caps, head.w, x, None, (&logits).into());
            self.extend(ops, "LM head")?;
            let ce = CrossEntropy {
                n: rows,
                vocab,
                softcap: head.softcap,
                weight: 1.0,
            };
            let op = ce.op((&logits).into(), View::at(targets, c0), View::at(loss, c0));
            loss_ops.push(self.push(op, "cross-entropy")?);
            if let Some(dx) = &dx {
                let dx = View::at(dx, c0 * d);
                self.input_grad_into(head.w, &logits, dx, false, rows)?;
            }
        }
        self.pool.give(logits);
        self.read_done(head.x);
        self.grads[head.x] = dx;
        Ok(loss_ops)
    }
}
