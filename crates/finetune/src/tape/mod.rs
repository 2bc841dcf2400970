//! The training tape on the CPU, in f64: the model's own graph, recorded.
//!
//! [`TapeBackend`] is an executor for [`rullama_model::Model`] like the CPU and GPU ones: the
//! architecture files run unchanged over its [`Tape`], which computes every op at once in
//! f64 and records it (a node of the tape) with its output. The outputs are the capture
//! buffers: this reference keeps all of them, so the backward walk ([`Tape::backward`]) reads
//! whatever an op's gradient needs. Each op's forward and backward maths are the f64 CPU
//! references that sit beside the GPU kernels in `rullama-kernels` (`RmsNorm::reference_f64`
//! and `rms_norm_backward_ref`, `Rope::reference_f64` and `backward_reference`,
//! `glu_backward_ref`, `attention_train_ref` and `attention_backward_ref`, `cross_entropy_ref`,
//! `adamw_ref`), so the tape is the oracle the GPU's training kernels are checked
//! against, and the finite-difference checks of `tests/gradients.rs` check it in turn. The
//! products are the tape's own loops (f64 sums over the f32-dequantized weights, split over
//! threads): `matmul_input_grad_ref` and `weight_grad_ref` take a whole f64 matrix, which
//! for a 262,144-word embedding would be 1.3 GB a call.
//!
//! Attention on the tape attends within the step (`attention_train_ref`): training feeds
//! whole sequences from position 0, with no KV cache. Trainable matrices are [`TapeWeight::Param`]s: their values live in the tape
//! ([`Tape::params_mut`]), so an optimizer updates them between steps while the model's
//! graph keeps the same handles.

mod backward;
mod engine;
mod matrix;
mod node;
mod weight;

use std::ops::Range;

use rullama_gguf::TensorView;
use rullama_kernels::ops::attention_train::{TrainAttention, attention_train_ref};
use rullama_kernels::ops::norm::RmsNorm;
use rullama_kernels::ops::rope::{Rope, rope_freqs};
use rullama_model::backend::{
    AttentionInputs, AttentionParams, KvCacheSpec, RmsNormParams, RopeParams,
};
use rullama_model::cpu::default_threads;
use rullama_model::{Activation, Backend, Result, Sequence};

use crate::data::SplitMix64;

pub use matrix::Matrix;
use matrix::par_rows;
use node::{Node, ValueId};
pub use weight::{Frozen, TapeWeight};

/// The tape's executor: the model's tensors dequantized, every step recorded in f64.
#[derive(Debug, Clone)]
pub struct TapeBackend {
    threads: usize,
}

impl Default for TapeBackend {
    fn default() -> Self {
        TapeBackend::new()
    }
}

impl TapeBackend {
    /// One worker per available core for the products (`RULLAMA_THREADS` overrides).
    pub fn new() -> TapeBackend {
        TapeBackend::with_threads(default_threads())
    }

    /// `threads` workers (at least one) for the products. The results do not depend on it.
    pub fn with_threads(threads: usize) -> TapeBackend {
        TapeBackend {
            threads: threads.max(1),
        }
    }
}

impl Backend for TapeBackend {
    type Weight = TapeWeight;
    type Sequence = Tape;

    fn load_weight(&mut self, view: TensorView<'_>) -> Result<TapeWeight> {
        TapeWeight::from_view(view)
    }

    /// A tape keeps no KV cache: each step attends within itself.
    fn new_sequence(&self, _spec: &KvCacheSpec) -> Result<Tape> {
        Ok(Tape {
            threads: self.threads,
            ..Tape::default()
        })
    }
}

/// A value on the tape (`Sequence::Tensor`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TapeValue(ValueId);

/// One sequence's tape: the trainable parameters' values, and the ops recorded since
/// [`Tape::clear`] with every op's output.
#[derive(Debug, Default)]
pub struct Tape {
    threads: usize,
    params: Vec<Matrix>,
    nodes: Vec<Node>,
    values: Vec<Matrix>,
    /// Set: a training step, whose LoRA dropout masks are drawn from this seed; `None`
    /// (evaluation): no dropout.
    dropout_seed: Option<u64>,
}

impl Tape {
    /// Forgets the recorded ops (not the parameters): the next step starts a new tape.
    pub fn clear(&mut self) {
        self.nodes.clear();
        self.values.clear();
    }

    /// Makes the next steps training steps whose LoRA dropout masks are drawn from `seed`
    /// (each input's mask a function of the seed, the op's place on the tape and the
    /// input's index: the same seed gives the same masks), or evaluation steps (`None`).
    pub fn set_dropout_seed(&mut self, seed: Option<u64>) {
        self.dropout_seed = seed;
    }

    /// The trainable matrices, by id ([`TapeWeight::Param`]).
    pub fn params(&self) -> &[Matrix] {
        &self.params
    }

    /// The trainable matrices, to set or update between steps.
    pub fn params_mut(&mut self) -> &mut Vec<Matrix> {
        &mut self.params
    }

    /// The value of `v`.
    pub fn value(&self, v: TapeValue) -> &Matrix {
        &self.values[v.0]
    }

    fn push(&mut self, node: Node, value: Matrix) -> TapeValue {
        self.nodes.push(node);
        self.values.push(value);
        TapeValue(self.values.len() - 1)
    }

    /// `x · (scale W)ᵀ` with `W` `n_out` rows of `n_in`, given as a row accessor.
    fn product<'a>(
        &self,
        x: &Matrix,
        n_out: usize,
        scale: f64,
        row: impl Fn(usize) -> RowRef<'a> + Sync,
    ) -> Matrix {
        let mut y = Matrix::zeros(x.rows, n_out);
        if x.rows >= self.threads {
            par_rows(&mut y.data, n_out, self.threads, |t0, out| {
                for (dt, yrow) in out.chunks_mut(n_out).enumerate() {
                    let xr = x.row(t0 + dt);
                    for (o, yo) in yrow.iter_mut().enumerate() {
                        *yo = scale * row(o).dot(xr);
                    }
                }
            });
            return y;
        }
        // Fewer tokens than threads: split the weight's rows instead (each output is the same
        // dot product either way, so the bits do not depend on the split).
        let mut yt = vec![0.0; n_out * x.rows];
        par_rows(&mut yt, x.rows, self.threads, |o0, out| {
            for (d, col) in out.chunks_mut(x.rows).enumerate() {
                let w = row(o0 + d);
                for (t, v) in col.iter_mut().enumerate() {
                    *v = scale * w.dot(x.row(t));
                }
            }
        });
        for (o, col) in yt.chunks(x.rows).enumerate() {
            for (t, &v) in col.iter().enumerate() {
                y.data[t * n_out + o] = v;
            }
        }
        y
    }
}

/// A weight row as f32 (frozen) or f64 (a parameter).
#[derive(Clone, Copy)]
pub(crate) enum RowRef<'a> {
    F32(&'a [f32]),
    F64(&'a [f64]),
}

impl RowRef<'_> {
    fn dot(self, x: &[f64]) -> f64 {
        match self {
            RowRef::F32(w) => w.iter().zip(x).map(|(&w, x)| f64::from(w) * x).sum(),
            RowRef::F64(w) => w.iter().zip(x).map(|(w, x)| w * x).sum(),
        }
    }

    /// `out += a * row[from..from + out.len()]`.
    fn axpy(self, a: f64, out: &mut [f64], from: usize) {
        let n = out.len();
        match self {
            RowRef::F32(w) => out
                .iter_mut()
                .zip(&w[from..from + n])
                .for_each(|(o, &w)| *o += a * f64::from(w)),
            RowRef::F64(w) => out
                .iter_mut()
                .zip(&w[from..from + n])
                .for_each(|(o, w)| *o += a * w),
        }
    }
}

/// The training attention of a step of `n` rows with the graph's attention parameters (both
/// engines attend within the step, no cache).
pub(crate) fn train_attention(n: usize, p: &AttentionParams) -> TrainAttention {
    TrainAttention {
        n,
        n_head: p.n_head,
        n_kv: p.n_head_kv,
        dk: p.head_dim_k,
        dv: p.head_dim_v,
        scale: p.scale,
        window: p.window.unwrap_or(0),
        softcap: p.softcap.unwrap_or(0.0),
    }
}

/// Dropout's factor of each of `len` inputs of op `node`: 0 with probability `p`, else
/// `1 / (1 - p)`, each drawn from SplitMix64 seeded by (seed, node, index).
fn dropout_mask(seed: u64, node: usize, len: usize, p: f64) -> Vec<f64> {
    let keep = 1.0 / (1.0 - p);
    let base = seed ^ (node as u64).wrapping_mul(0xD1B5_4A32_D192_ED03);
    (0..len)
        .map(|i| {
            let mut rng = SplitMix64::new(base ^ (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
            let u = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
            if u < p { 0.0 } else { keep }
        })
        .collect()
}

/// `x ⊙ mask`.
fn masked(x: &Matrix, mask: &[f64]) -> Matrix {
    let data = x.data.iter().zip(mask).map(|(x, m)| x * m).collect();
    Matrix::new(x.rows, x.cols, data)
}

fn vector_f64(w: &TapeWeight) -> Vec<f64> {
    w.frozen().data.iter().map(|&v| f64::from(v)).collect()
}

impl Sequence for Tape {
    type Weight = TapeWeight;
    type Tensor = TapeValue;
    type Ids = Vec<u32>;

    fn ids(&mut self, ids: &[u32]) -> Vec<u32> {
        ids.to_vec()
    }

    fn embed(&mut self, table: &TapeWeight, ids: &Vec<u32>) -> TapeValue {
        let t = table.frozen();
        let mut x = Matrix::zeros(ids.len(), t.n_in);
        for (i, &id) in ids.iter().enumerate() {
            let src = t.row(id as usize);
            x.row_mut(i)
                .iter_mut()
                .zip(src)
                .for_each(|(d, &s)| *d = f64::from(s));
        }
        self.push(Node::Embed, x)
    }

    fn matmul(&mut self, w: &TapeWeight, x: &TapeValue) -> TapeValue {
        let xv = &self.values[x.0];
        let mut mask = None;
        let y = match w {
            TapeWeight::Frozen(f) => {
                assert_eq!(xv.cols, f.n_in, "matmul: input width vs weight rows");
                self.product(xv, f.n_out, 1.0, |o| RowRef::F32(f.row(o)))
            }
            TapeWeight::Param { id, scale, dropout } => {
                let p = &self.params[*id];
                assert_eq!(xv.cols, p.cols, "matmul: input width vs parameter {id}");
                match self.dropout_seed.filter(|_| *dropout > 0.0) {
                    Some(seed) => {
                        let m = dropout_mask(seed, self.nodes.len(), xv.data.len(), *dropout);
                        let dropped = masked(xv, &m);
                        let y = self.product(&dropped, p.rows, *scale, |o| RowRef::F64(p.row(o)));
                        mask = Some(m);
                        y
                    }
                    None => self.product(xv, p.rows, *scale, |o| RowRef::F64(p.row(o))),
                }
            }
        };
        let node = Node::Matmul {
            w: w.clone(),
            x: x.0,
            mask,
        };
        self.push(node, y)
    }

    fn add_bias(&mut self, x: &TapeValue, bias: &TapeWeight) -> TapeValue {
        let b = vector_f64(bias);
        let mut y = self.values[x.0].clone();
        for r in 0..y.rows {
            y.row_mut(r).iter_mut().zip(&b).for_each(|(y, b)| *y += b);
        }
        self.push(Node::AddBias { x: x.0 }, y)
    }

    fn rms_norm(&mut self, x: &TapeValue, p: &RmsNormParams<'_, TapeWeight>) -> TapeValue {
        let xv = &self.values[x.0];
        let norm = RmsNorm {
            n: p.group,
            n_rows: xv.data.len() / p.group,
            eps: p.eps,
        };
        let gain = p.weight.map(vector_f64);
        let y = Matrix::new(
            xv.rows,
            xv.cols,
            norm.reference_f64(&xv.data, gain.as_deref()),
        );
        let node = Node::RmsNorm {
            x: x.0,
            norm,
            gain: p.weight.cloned(),
        };
        self.push(node, y)
    }

    fn rope(&mut self, x: &TapeValue, positions: &Vec<u32>, p: &RopeParams) -> TapeValue {
        let mut y = self.values[x.0].clone();
        let rope = Rope {
            style: p.style,
            head_dim: p.head_dim,
            n_rot: p.n_rot,
            n_heads: y.cols / p.head_dim,
            n_tokens: y.rows,
        };
        let freqs = rope_freqs(p.n_rot, f64::from(p.base), f64::from(p.freq_scale), None);
        rope.reference_f64(&mut y.data, positions, &freqs);
        let node = Node::Rope {
            x: x.0,
            rope,
            positions: positions.clone(),
            freqs,
        };
        self.push(node, y)
    }

    fn attention(
        &mut self,
        x: AttentionInputs<'_, TapeValue, Vec<u32>>,
        p: &AttentionParams,
    ) -> TapeValue {
        let n = x.positions.len();
        let attn = train_attention(n, p);
        // Each row's sequence starts `position` rows before it: a tape step holds whole
        // sequences from position 0 (it has no cache to hold an earlier part).
        let start: Vec<u32> = x
            .positions
            .iter()
            .enumerate()
            .map(|(i, &pos)| {
                let first = (i as u32).checked_sub(pos);
                first.expect("a tape step starts its sequence at position 0")
            })
            .collect();
        let (q, k, v) = (x.q.0, x.k.0, x.v.0);
        let values = |id: usize| &self.values[id].data;
        let (o, _) = attention_train_ref(&attn, values(q), values(k), values(v), &start);
        let o = Matrix::new(n, p.n_head * p.head_dim_v, o);
        self.push(
            Node::Attention {
                q,
                k,
                v,
                attn,
                start,
            },
            o,
        )
    }

    fn glu(&mut self, gate: &TapeValue, up: &TapeValue, act: Activation) -> TapeValue {
        let (g, u) = (&self.values[gate.0], &self.values[up.0]);
        let data = g
            .data
            .iter()
            .zip(&u.data)
            .map(|(&g, u)| act.apply(g) * u)
            .collect();
        let y = Matrix::new(g.rows, g.cols, data);
        self.push(
            Node::Glu {
                gate: gate.0,
                up: up.0,
                act,
            },
            y,
        )
    }

    fn add(&mut self, a: &TapeValue, b: &TapeValue) -> TapeValue {
        let mut y = self.values[a.0].clone();
        y.add_assign(&self.values[b.0]);
        self.push(Node::Add { a: a.0, b: b.0 }, y)
    }

    fn scale(&mut self, x: &TapeValue, s: f32) -> TapeValue {
        let s = f64::from(s);
        let mut y = self.values[x.0].clone();
        y.data.iter_mut().for_each(|v| *v *= s);
        self.push(Node::Scale { x: x.0, s }, y)
    }

    fn softcap(&mut self, x: &TapeValue, cap: f32) -> TapeValue {
        let cap = f64::from(cap);
        let mut y = self.values[x.0].clone();
        y.data.iter_mut().for_each(|v| *v = cap * (*v / cap).tanh());
        self.push(Node::Softcap { x: x.0, cap }, y)
    }

    fn rows(&mut self, x: &TapeValue, range: Range<usize>) -> TapeValue {
        let xv = &self.values[x.0];
        let data = xv.data[range.start * xv.cols..range.end * xv.cols].to_vec();
        let y = Matrix::new(range.len(), xv.cols, data);
        self.push(
            Node::Rows {
                x: x.0,
                start: range.start,
            },
            y,
        )
    }

    fn read(&mut self, x: &TapeValue) -> Result<Vec<f32>> {
        Ok(self.values[x.0].data.iter().map(|&v| v as f32).collect())
    }
}
