//! Causal attention within one step, as training runs it (no KV cache), in f64: the forward
//! and its gradient.
//!
//! Row `i` (a token at position `pos[i]`) attends to the rows `j` of the step with
//! `pos[j] <= pos[i]` and, with a window `w`, `pos[i] - pos[j] < w`. Per query head `h`
//! (KV head `h / (n_head / n_kv)`): `s_j = scale q·k_j`, optionally `c tanh(s_j / c)`,
//! `p = softmax(s)`, `o = Σ p_j v_j`. The backward recomputes `p` and follows
//! `dv_j += p_j do`, `dp_j = do·v_j`, `ds_j = p_j (dp_j - Σ_l p_l dp_l)`, through the soft-cap
//! `× (1 - tanh²(s_raw / c))`, then `dq += scale Σ_j ds_j k_j` and `dk_j += scale ds_j q`.

use super::matrix::Matrix;

/// The shape and rules of one attention.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct CausalAttention {
    pub n_head: usize,
    pub n_kv: usize,
    pub dk: usize,
    pub dv: usize,
    pub scale: f64,
    pub window: Option<usize>,
    pub softcap: Option<f64>,
}

impl CausalAttention {
    fn visible(&self, pos: &[u32], i: usize, j: usize) -> bool {
        pos[j] <= pos[i] && self.window.is_none_or(|w| ((pos[i] - pos[j]) as usize) < w)
    }

    /// The raw scores of query row `i`, head `h`, over the visible rows (`None`: hidden), and
    /// their softmax.
    fn probs(
        &self,
        q: &Matrix,
        k: &Matrix,
        pos: &[u32],
        i: usize,
        h: usize,
    ) -> Vec<Option<(f64, f64)>> {
        let g = h / (self.n_head / self.n_kv);
        let qh = &q.row(i)[h * self.dk..(h + 1) * self.dk];
        let mut scores: Vec<Option<(f64, f64)>> = (0..k.rows)
            .map(|j| {
                self.visible(pos, i, j).then(|| {
                    let kh = &k.row(j)[g * self.dk..(g + 1) * self.dk];
                    let s: f64 = qh.iter().zip(kh).map(|(a, b)| a * b).sum::<f64>() * self.scale;
                    (s, self.softcap.map_or(s, |c| c * (s / c).tanh()))
                })
            })
            .collect();
        let max = scores
            .iter()
            .flatten()
            .map(|s| s.1)
            .fold(f64::NEG_INFINITY, f64::max);
        let sum: f64 = scores.iter().flatten().map(|s| (s.1 - max).exp()).sum();
        for s in scores.iter_mut().flatten() {
            s.1 = (s.1 - max).exp() / sum;
        }
        scores
    }

    /// `o`: `[n, n_head * dv]`.
    pub fn forward(&self, q: &Matrix, k: &Matrix, v: &Matrix, pos: &[u32]) -> Matrix {
        let mut o = Matrix::zeros(q.rows, self.n_head * self.dv);
        for i in 0..q.rows {
            for h in 0..self.n_head {
                let g = h / (self.n_head / self.n_kv);
                let p = self.probs(q, k, pos, i, h);
                let out = &mut o.row_mut(i)[h * self.dv..(h + 1) * self.dv];
                for (j, p) in p.iter().enumerate() {
                    if let Some((_, p)) = p {
                        let vh = &v.row(j)[g * self.dv..(g + 1) * self.dv];
                        out.iter_mut().zip(vh).for_each(|(o, v)| *o += p * v);
                    }
                }
            }
        }
        o
    }

    /// `(dq, dk, dv)` from `d_o`.
    pub fn backward(
        &self,
        q: &Matrix,
        k: &Matrix,
        v: &Matrix,
        pos: &[u32],
        d_o: &Matrix,
    ) -> (Matrix, Matrix, Matrix) {
        let (mut dq, mut dk, mut dv) = (
            Matrix::zeros(q.rows, q.cols),
            Matrix::zeros(k.rows, k.cols),
            Matrix::zeros(v.rows, v.cols),
        );
        for i in 0..q.rows {
            for h in 0..self.n_head {
                let g = h / (self.n_head / self.n_kv);
                let p = self.probs(q, k, pos, i, h);
                let doh = &d_o.row(i)[h * self.dv..(h + 1) * self.dv];
                let dp: Vec<f64> = (0..k.rows)
                    .map(|j| {
                        let vh = &v.row(j)[g * self.dv..(g + 1) * self.dv];
                        doh.iter().zip(vh).map(|(a, b)| a * b).sum()
                    })
                    .collect();
                let mean: f64 = p
                    .iter()
                    .zip(&dp)
                    .filter_map(|(p, dp)| p.map(|(_, p)| p * dp))
                    .sum();
                for (j, pj) in p.iter().enumerate() {
                    let Some((raw, pj)) = *pj else { continue };
                    let dvj = &mut dv.row_mut(j)[g * self.dv..(g + 1) * self.dv];
                    dvj.iter_mut().zip(doh).for_each(|(d, o)| *d += pj * o);
                    let mut ds = pj * (dp[j] - mean);
                    if let Some(c) = self.softcap {
                        let t = (raw / c).tanh();
                        ds *= 1.0 - t * t;
                    }
                    let ds = ds * self.scale;
                    for d in 0..self.dk {
                        let (qv, kv) = (q.row(i)[h * self.dk + d], k.row(j)[g * self.dk + d]);
                        dq.row_mut(i)[h * self.dk + d] += ds * kv;
                        dk.row_mut(j)[g * self.dk + d] += ds * qv;
                    }
                }
            }
        }
        (dq, dk, dv)
    }
}
