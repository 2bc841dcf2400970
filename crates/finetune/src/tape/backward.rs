//! The backward walk: the tape in reverse, one gradient rule per op, from the loss's
//! gradient to the trainable matrices'.

use rullama_kernels::ops::attention_backward::attention_backward_ref;
use rullama_kernels::ops::glu_backward::glu_backward_ref;
use rullama_kernels::ops::rms_norm_backward::rms_norm_backward_ref;

use super::matrix::{Matrix, par_rows};
use super::node::Node;
use super::{RowRef, Tape, TapeValue, TapeWeight, masked, vector_f64};

impl Tape {
    /// Adds to `grads` (one per parameter, shaped as [`Tape::params`]) the gradient of the
    /// loss whose gradient with respect to value `out` is `d_out`. Gradients flow only
    /// along values that depend on a parameter (nothing is computed for the layers' frozen
    /// inputs below them).
    pub fn backward(&self, out: TapeValue, d_out: Matrix, grads: &mut [Matrix]) {
        assert_eq!(grads.len(), self.params.len(), "one gradient per parameter");
        let trainable = self.trainable();
        let mut d: Vec<Option<Matrix>> = vec![None; self.values.len()];
        d[out.0] = Some(d_out);
        for i in (0..self.nodes.len()).rev() {
            let Some(dy) = d[i].take() else { continue };
            if !trainable[i] {
                continue;
            }
            for (input, dx) in self.node_backward(i, &dy, grads) {
                if !trainable[input] {
                    continue;
                }
                match &mut d[input] {
                    Some(acc) => acc.add_assign(&dx),
                    slot => *slot = Some(dx),
                }
            }
        }
    }

    /// Whether each value depends on a parameter.
    fn trainable(&self) -> Vec<bool> {
        let mut t = vec![false; self.nodes.len()];
        for (i, node) in self.nodes.iter().enumerate() {
            t[i] = match node {
                Node::Matmul {
                    w: TapeWeight::Param { .. },
                    ..
                } => true,
                _ => inputs(node).iter().any(|&x| t[x]),
            };
        }
        t
    }

    /// Node `i`'s gradients into its inputs, given `dy` for its output; a parameter's
    /// gradient goes into `grads`.
    fn node_backward(&self, i: usize, dy: &Matrix, grads: &mut [Matrix]) -> Vec<(usize, Matrix)> {
        let v = |x: usize| &self.values[x];
        let like = |x: usize, data: Vec<f64>| Matrix::new(v(x).rows, v(x).cols, data);
        match &self.nodes[i] {
            Node::Embed => vec![],
            Node::Matmul { w, x, mask } => {
                let x = *x;
                match w {
                    TapeWeight::Frozen(f) => {
                        vec![(
                            x,
                            self.input_grad(dy, f.n_in, 1.0, |o| RowRef::F32(f.row(o))),
                        )]
                    }
                    TapeWeight::Param { id, scale, .. } => {
                        let p = &self.params[*id];
                        let dx = self.input_grad(dy, p.cols, *scale, |o| RowRef::F64(p.row(o)));
                        match mask {
                            // The product read x ⊙ mask: its gradients are the masked
                            // input's, and dx is masked in turn.
                            Some(m) => {
                                weight_grad(dy, &masked(v(x), m), *scale, &mut grads[*id]);
                                vec![(x, masked(&dx, m))]
                            }
                            None => {
                                weight_grad(dy, v(x), *scale, &mut grads[*id]);
                                vec![(x, dx)]
                            }
                        }
                    }
                }
            }
            Node::AddBias { x } => vec![(*x, dy.clone())],
            Node::RmsNorm { x, norm, gain } => {
                let g = gain.as_ref().map(vector_f64);
                let (dx, _) = rms_norm_backward_ref(*norm, &v(*x).data, g.as_deref(), &dy.data);
                vec![(*x, like(*x, dx))]
            }
            Node::Rope {
                x,
                rope,
                positions,
                freqs,
            } => {
                let mut dx = dy.data.clone();
                rope.backward_reference(&mut dx, positions, freqs);
                vec![(*x, like(*x, dx))]
            }
            Node::Attention {
                q,
                k,
                v: vv,
                attn,
                start,
            } => {
                let (q, k, vv) = (*q, *k, *vv);
                let (dq, dk, dv) = attention_backward_ref(
                    attn,
                    &v(q).data,
                    &v(k).data,
                    &v(vv).data,
                    start,
                    &dy.data,
                );
                vec![(q, like(q, dq)), (k, like(k, dk)), (vv, like(vv, dv))]
            }
            Node::Glu { gate, up, act } => {
                let (dg, du) = glu_backward_ref(*act, &v(*gate).data, &v(*up).data, &dy.data);
                vec![(*gate, like(*gate, dg)), (*up, like(*up, du))]
            }
            Node::Add { a, b } => vec![(*a, dy.clone()), (*b, dy.clone())],
            Node::Scale { x, s } => vec![(*x, like(*x, dy.data.iter().map(|d| d * s).collect()))],
            Node::Softcap { x, cap } => {
                let dx = dy
                    .data
                    .iter()
                    .zip(&v(*x).data)
                    .map(|(d, x)| {
                        let t = (x / cap).tanh();
                        d * (1.0 - t * t)
                    })
                    .collect();
                vec![(*x, like(*x, dx))]
            }
            Node::Rows { x, start } => {
                let mut dx = Matrix::zeros(v(*x).rows, v(*x).cols);
                let at = start * dx.cols;
                dx.data[at..at + dy.data.len()].copy_from_slice(&dy.data);
                vec![(*x, dx)]
            }
        }
    }

    /// `dx = dy · (scale W)`, `W` `dy.cols` rows of `n_in`.
    fn input_grad<'a>(
        &self,
        dy: &Matrix,
        n_in: usize,
        scale: f64,
        row: impl Fn(usize) -> RowRef<'a> + Sync,
    ) -> Matrix {
        let mut dx = Matrix::zeros(dy.rows, n_in);
        if dy.rows >= self.threads {
            par_rows(&mut dx.data, n_in, self.threads, |t0, out| {
                for (dt, xrow) in out.chunks_mut(n_in).enumerate() {
                    for (o, &d) in dy.row(t0 + dt).iter().enumerate() {
                        if d != 0.0 {
                            row(o).axpy(scale * d, xrow, 0);
                        }
                    }
                }
            });
            return dx;
        }
        // Fewer tokens than threads: split the columns of dx instead, each thread summing its
        // columns over the weight's rows in the same order (the same bits as one thread).
        let per = n_in.div_ceil(self.threads);
        let parts: Vec<(usize, Vec<f64>)> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..n_in)
                .step_by(per.max(1))
                .map(|i0| {
                    let row = &row;
                    s.spawn(move || {
                        let width = per.min(n_in - i0);
                        let mut part = vec![0.0; dy.rows * width];
                        for (t, out) in part.chunks_mut(width).enumerate() {
                            for (o, &d) in dy.row(t).iter().enumerate() {
                                if d != 0.0 {
                                    row(o).axpy(scale * d, out, i0);
                                }
                            }
                        }
                        (i0, part)
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("a product thread panicked"))
                .collect()
        });
        for (i0, part) in parts {
            let width = part.len() / dy.rows.max(1);
            for (t, src) in part.chunks(width.max(1)).enumerate() {
                dx.row_mut(t)[i0..i0 + width].copy_from_slice(src);
            }
        }
        dx
    }
}

/// `grad += scale dyᵀ · x`: the product's weight gradient, summed over the tokens.
fn weight_grad(dy: &Matrix, x: &Matrix, scale: f64, grad: &mut Matrix) {
    for t in 0..dy.rows {
        let xr = x.row(t);
        for (o, &d) in dy.row(t).iter().enumerate() {
            if d != 0.0 {
                grad.row_mut(o)
                    .iter_mut()
                    .zip(xr)
                    .for_each(|(g, x)| *g += scale * d * x);
            }
        }
    }
}

/// The values a node reads.
fn inputs(node: &Node) -> Vec<usize> {
    match node {
        Node::Embed => vec![],
        Node::Matmul { x, .. }
        | Node::AddBias { x }
        | Node::RmsNorm { x, .. }
        | Node::Rope { x, .. }
        | Node::Scale { x, .. }
        | Node::Softcap { x, .. }
        | Node::Rows { x, .. } => vec![*x],
        Node::Attention { q, k, v, .. } => vec![*q, *k, *v],
        Node::Glu { gate, up, .. } => vec![*gate, *up],
        Node::Add { a, b } => vec![*a, *b],
    }
}
