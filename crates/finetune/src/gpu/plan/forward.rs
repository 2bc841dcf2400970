//! The forward of a recorded step and its loss head, emitted node by node.

use std::rc::Rc;

use rullama_kernels::ops::attention_train::TrainAttentionForward;
use rullama_kernels::ops::cross_entropy::CrossEntropy;
use rullama_kernels::ops::f16_copy::{
    check_transposable, f16_copy, f16_copy_len, f16_copy_transposed,
};
use rullama_kernels::ops::matmul::Tile;
use rullama_kernels::ops::matmul_dense::DenseTile;
use rullama_kernels::ops::split::Out;
use rullama_kernels::ops::split_k::SplitK;
use rullama_kernels::ops::{dropout, elementwise, embed, glu, unary};
use rullama_kernels::{GpuFormat, GpuTensor, GpuWeight, OpId, View, WeightShape};
use rullama_model::ModelError;

use super::{Lower, pair_key_splits};
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
        let (rows, len) = (self.shapes[i][0], self.len(i));
        let nodes = self.nodes;
        let out = match &nodes[i] {
            Node::Embed { table, ids } => {
                let out = self.fresh(i)?;
                let ops =
                    embed::embed_rows(table, (&self.ids[*ids]).into(), rows, (&out).into(), 1.0);
                self.extend(ops, "embedding")?;
                out
            }
            Node::Matmul { w, x } => {
                let out = self.fresh(i)?;
                let x = self.value(*x).clone();
                self.product(w, &x, (&out).into(), rows, "product")?;
                out
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
                        let op =
                            dropout::dropout_out(self.value(x).into(), (&t).into(), n, dropout, 0);
                        let op = self.push(op, "dropout")?;
                        self.dropout_ops.push((op, i));
                        Some(t)
                    }
                    false => None,
                };
                let out = self.fresh(i)?;
                let input = masked.clone().unwrap_or_else(|| self.value(x).clone());
                let params = self.params;
                self.product(
                    &params.weights[id],
                    &input,
                    (&out).into(),
                    rows,
                    "adapter product",
                )?;
                if let Some(t) = masked {
                    self.masked.insert(i, t);
                }
                if scale != 1.0 {
                    self.push(unary::scale((&out).into(), len, scale), "adapter scale")?;
                }
                out
            }
            Node::AddBias { x, bias } => {
                let out = self.in_place(*x, i, "bias")?;
                let cols = self.shapes[i][1];
                self.push(
                    elementwise::add_rows((&out).into(), (&**bias).into(), rows, cols),
                    "bias",
                )?;
                out
            }
            Node::RmsNorm { x, norm, gain } => {
                let out = self.fresh(i)?;
                let op = norm.op(self.value(*x).into(), (&out).into(), gain.as_deref());
                self.push(op, "norm")?;
                out
            }
            Node::Rope {
                x,
                rope,
                positions,
                freqs,
            } => {
                let out = self.in_place(*x, i, "rope")?;
                let op = rope.op((&out).into(), (&self.ids[*positions]).into(), freqs);
                self.push(op, "rope")?;
                out
            }
            Node::Attention {
                q,
                k,
                v,
                attn,
                positions,
            } => {
                let out = self.fresh(i)?;
                let lse = self.pool.take(gpu, attn.n * attn.n_head)?;
                let start = self.start(*positions);
                let coop = attn.uses_tensor_cores(&self.gpu.caps, self.tensor_cores);
                let splits = pair_key_splits(attn, coop);
                let (q, k, v) = (*q, *k, *v);
                let o = View::from(&out);
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
                out
            }
            Node::Glu { gate, up, act } => {
                let out = self.fresh(i)?;
                let op = glu::glu(
                    *act,
                    self.value(*gate).into(),
                    self.value(*up).into(),
                    (&out).into(),
                    len,
                );
                self.push(op, "glu")?;
                out
            }
            &Node::Add { a, b } => {
                // Into whichever input dies here (b + a is a + b, bit for bit), else into a
                // new buffer.
                let into = match self.dying(a) {
                    Some(t) => Some((t, b)),
                    None => self.dying(b).map(|t| (t, a)),
                };
                if let Some((t, other)) = into {
                    let op = elementwise::add_inplace((&t).into(), self.value(other).into(), len);
                    self.push(op, "add")?;
                    t
                } else {
                    let out = self.fresh(i)?;
                    let op = elementwise::add(
                        self.value(a).into(),
                        self.value(b).into(),
                        (&out).into(),
                        len,
                    );
                    self.push(op, "add")?;
                    out
                }
            }
            &Node::Scale { x, s } => self.map(unary::UnaryOp::Scale, x, i, s, "scale")?,
            &Node::Softcap { x, cap } => self.map(unary::UnaryOp::SoftCap, x, i, cap, "softcap")?,
            Node::Rows { x, start } => {
                let out = self.fresh(i)?;
                let from = View::at(self.value(*x), start * self.shapes[i][1]);
                self.push(elementwise::copy(from, (&out).into(), len), "rows")?;
                out
            }
        };
        self.values[i] = Some(out);
        if self.readers[i] == 0 {
            // Nothing reads it (a value the graph made and left).
            self.readers[i] = 1;
            self.read_done(i);
        }
        for x in nodes[i].inputs() {
            self.read_done(x);
        }
        Ok(())
    }

    /// A new buffer for node `i`'s output.
    fn fresh(&mut self, i: ValueId) -> Result<GpuTensor> {
        self.pool.take(self.gpu, self.len(i))
    }

    /// `x`'s buffer, if the node being lowered is its last reader (forward or backward): the
    /// node may then write its output over it. [`Lower::read_done`] finds it gone.
    fn dying(&mut self, x: ValueId) -> Option<GpuTensor> {
        match self.readers[x] {
            1 => self.values[x].take(),
            _ => None,
        }
    }

    /// A buffer holding `x`'s values for node `i` to change in place: `x`'s own where `i` is
    /// its last reader, else a copy.
    fn in_place(&mut self, x: ValueId, i: ValueId, what: &'static str) -> Result<GpuTensor> {
        if let Some(t) = self.dying(x) {
            return Ok(t);
        }
        let out = self.fresh(i)?;
        let len = self.len(i);
        self.push(
            elementwise::copy(self.value(x).into(), (&out).into(), len),
            what,
        )?;
        Ok(out)
    }

    /// `op(x, value)` for node `i`: over `x` where `i` is its last reader, else into a new
    /// buffer.
    fn map(
        &mut self,
        op: unary::UnaryOp,
        x: ValueId,
        i: ValueId,
        value: f32,
        what: &'static str,
    ) -> Result<GpuTensor> {
        let len = self.len(i);
        if let Some(t) = self.dying(x) {
            self.push(unary::unary(op, (&t).into(), len, value), what)?;
            return Ok(t);
        }
        let out = self.fresh(i)?;
        let op = unary::unary_out(op, self.value(x).into(), (&out).into(), len, value);
        self.push(op, what)?;
        Ok(out)
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
        let chunks = n.div_ceil(chunk);
        let dense = self.head_dense(head.w, chunk, chunks)?;
        let grad_dense = match (backward, &dense) {
            (true, Some(_)) => self.head_grad_dense(head.w, chunk)?,
            _ => None,
        };
        let mut loss_ops = Vec::new();
        for c0 in (0..n).step_by(chunk) {
            let rows = chunk.min(n - c0);
            let x = View::at(self.value(head.x), c0 * d);
            let m = self.matmul(rows);
            let ops = match (&dense, DenseTile::for_shape(vocab, rows)) {
                (Some((_, copy)), Some(tile)) => m.dense_ops(tile, copy, x, None, (&logits).into()),
                _ => m.ops(&gpu.caps, head.w, x, None, (&logits).into()),
            };
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
                match &grad_dense {
                    Some(g) => {
                        let out = Out::new(dx, d);
                        let ops = m.split_k_ops(
                            g.copy.all_rows(),
                            (&logits).into(),
                            None,
                            &[out],
                            (&g.scratch).into(),
                            g.split,
                        );
                        self.extend(ops, "LM head input gradient")?;
                    }
                    None => self.input_grad_into(head.w, &logits, dx, false, rows)?,
                }
            }
        }
        self.pool.give(logits);
        if let Some((t, _)) = dense {
            self.pool.give(t);
        }
        if let Some(g) = grad_dense {
            self.pool.give(g.buf);
            self.pool.give(g.scratch);
        }
        self.read_done(head.x);
        self.grads[head.x] = dx.map(Rc::new);
        Ok(loss_ops)
    }

    /// The LM head's weight copied to f16 once for the step's chunks (a buffer from the pool
    /// and the F16 weight over it), where the head's product takes the dense tensor-core kernel
    /// (`Matmul::dense_ops`): on the tensor cores, over at least [`HEAD_DENSE_MIN_CHUNKS`]
    /// chunks of `chunk` rows, with rows the dense kernel and one binding take. `None`: the
    /// product reads the weight as stored.
    fn head_dense(
        &mut self,
        w: &GpuWeight,
        chunk: usize,
        chunks: usize,
    ) -> Result<Option<(GpuTensor, GpuWeight)>> {
        let s = w.shape;
        let dense = chunks >= HEAD_DENSE_MIN_CHUNKS
            && self.dense_copy_fits(s)
            && DenseTile::for_shape(s.n_out, chunk).is_some();
        if !dense {
            return Ok(None);
        }
        let t = self.pool.take(self.gpu, f16_copy_len(w.all_rows()))?;
        self.extend(f16_copy(w.all_rows(), (&t).into()), "LM head f16 copy")?;
        let shape = WeightShape {
            format: GpuFormat::F16,
            ..s
        };
        let copy = GpuWeight::in_buffer(shape, t.buf.clone());
        Ok(Some((t, copy)))
    }

    /// The LM head's `Wᵀ` copied to f16 once for the step's chunks, where its input gradient
    /// `dx = dy W` takes the dense kernel as the product `dy (Wᵀ)ᵀ`, split K over the
    /// vocabulary (`Matmul::split_k_ops` with a dense tile). The caller asks only where the
    /// forward took the head's dense copy ([`Lower::head_dense`]); here `Wᵀ`'s rows must fit
    /// the kernel and one binding. On gemma-3-270m's head
    /// (256 tokens x 640 x 262,144) that ran at 124 TFLOP/s against 83 for the tensor-core
    /// input gradient over the Q8_0 rows as stored (docs/PERF.md, D-head-grad-dense); the copy
    /// costs one pass over the weight a step and its f16 bytes (335 MB) through the head.
    /// `None`: the gradient reads the weight as stored (`input_grad_into`).
    fn head_grad_dense(&mut self, w: &GpuWeight, chunk: usize) -> Result<Option<HeadGradDense>> {
        let s = w.shape;
        let transposed = WeightShape {
            format: GpuFormat::F16,
            n_in: s.n_out,
            n_out: s.n_in,
        };
        if !(self.dense_copy_fits(transposed) && check_transposable(w).is_ok()) {
            return Ok(None);
        }
        let buf = self.pool.take(self.gpu, f16_copy_len(w.all_rows()))?;
        self.extend(
            f16_copy_transposed(w, (&buf).into()),
            "LM head transposed f16 copy",
        )?;
        let copy = GpuWeight::in_buffer(transposed, buf.buf.clone());
        let split = SplitK {
            splits: head_grad_splits(s.n_in, chunk, s.n_out),
            tile: Tile::Dense(DenseTile::Square),
        };
        let len = self.matmul(chunk).split_k_scratch(copy.all_rows(), split);
        let scratch = self.pool.take(self.gpu, len)?;
        Ok(Some(HeadGradDense {
            buf,
            copy,
            split,
            scratch,
        }))
    }
}

/// The LM head's input gradient on the dense kernel ([`Lower::head_grad_dense`]): `Wᵀ` in
/// f16 (the F16 weight `copy` over the pool buffer `buf`), the split and the split-K partial
/// sums' scratch, for the head's chunks.
struct HeadGradDense {
    buf: GpuTensor,
    copy: GpuWeight,
    split: SplitK,
    scratch: GpuTensor,
}

/// Workgroups the head's split-K input gradient aims at: 256 took 695 us a 256-token chunk of
/// gemma-3-270m's head on the H200, 130 (13 splits) 715 and 400 (40) 917.
const HEAD_GRAD_WORKGROUPS: usize = 256;

/// Splits of the head gradient's sum over `vocab` rows for a chunk of `rows` tokens and `d`
/// outputs: enough for [`HEAD_GRAD_WORKGROUPS`] 128 x 128 workgroups, each summing at least
/// 8 units of 32.
fn head_grad_splits(d: usize, rows: usize, vocab: usize) -> usize {
    let tiles = d.div_ceil(128) * rows.div_ceil(128);
    HEAD_GRAD_WORKGROUPS
        .div_ceil(tiles)
        .min(vocab / 32 / 8)
        .max(1)
}

/// The fewest chunks of the loss head over which its weight is copied to f16 for the dense
/// kernel: the copy (a pass over the weight, its f16 bytes held through the head) pays once
/// the product runs over several chunks, and at a single sequence the memory it holds is what
/// the step must not grow (a batch of one at 512 tokens is two chunks of gemma-3-270m's head).
const HEAD_DENSE_MIN_CHUNKS: usize = 4;

#[cfg(test)]
mod tests {
    use super::*;

    /// gemma-3-270m's head over a 256-token chunk: 5 x 2 tiles of 128, 26 splits of the
    /// vocabulary (260 workgroups, each summing 10,083 rows); a short vocabulary caps the splits
    /// at units of 8 x 32 rows.
    #[test]
    fn head_grad_split_counts() {
        assert_eq!(head_grad_splits(640, 256, 262_144), 26);
        assert_eq!(head_grad_splits(2560, 256, 262_144), 7);
        assert_eq!(head_grad_splits(640, 256, 1024), 4);
    }
}
