//! The GPU tape as the graph sees it: a [`Sequence`] whose ops record nodes (what each
//! computes from, and its output's shape) for the engine to lower into kernels.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;

use rullama_kernels::ops::attention_train::TrainAttention;
use rullama_kernels::ops::norm::RmsNorm;
use rullama_kernels::ops::rope::{Rope, rope_freqs};
use rullama_kernels::{Activation, Gpu, GpuTensor, GpuWeight};
use rullama_model::backend::{AttentionInputs, AttentionParams, RmsNormParams, RopeParams};
use rullama_model::{ModelError, Result, Sequence};

use super::GpuTapeWeight;
use crate::tape::train_attention;

/// A value of the tape: node `i`'s output.
pub(crate) type ValueId = usize;

/// A value on the GPU tape (`Sequence::Tensor`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GpuValue(pub(crate) ValueId);

/// Token ids or positions of the step being recorded (`Sequence::Ids`): which of the step's
/// id lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GpuIds(pub(crate) usize);

/// One recorded op; its output is the value with the node's index.
#[derive(Debug, Clone)]
pub(crate) enum Node {
    /// Rows of a frozen table.
    Embed { table: Arc<GpuWeight>, ids: usize },
    /// `x · Wᵀ`, `W` frozen.
    Matmul { w: Arc<GpuWeight>, x: ValueId },
    /// `scale · (x ⊙ mask) · Pᵀ`, `P` trainable parameter `id`, the mask LoRA dropout's
    /// (probability `dropout`, in training steps only).
    Param {
        id: usize,
        scale: f32,
        dropout: f32,
        x: ValueId,
    },
    /// `x + bias` on every row.
    AddBias { x: ValueId, bias: Arc<GpuTensor> },
    /// RMS norm of every `norm.n` values, with an optional gain.
    RmsNorm {
        x: ValueId,
        norm: RmsNorm,
        gain: Option<Arc<GpuTensor>>,
    },
    /// Rotary embedding at the positions of id list `positions`.
    Rope {
        x: ValueId,
        rope: Rope,
        positions: usize,
        freqs: Arc<GpuTensor>,
    },
    /// Causal attention within each sequence of the step (where positions restart, a new
    /// one starts).
    Attention {
        q: ValueId,
        k: ValueId,
        v: ValueId,
        attn: TrainAttention,
        positions: usize,
    },
    /// `act(gate) * up`.
    Glu {
        gate: ValueId,
        up: ValueId,
        act: Activation,
    },
    /// `a + b`.
    Add { a: ValueId, b: ValueId },
    /// `x * s`.
    Scale { x: ValueId, s: f32 },
    /// `cap * tanh(x / cap)`.
    Softcap { x: ValueId, cap: f32 },
    /// Rows `start..start + len` of `x`.
    Rows { x: ValueId, start: usize },
}

impl Node {
    /// The values it reads.
    pub(crate) fn inputs(&self) -> Vec<ValueId> {
        match *self {
            Node::Embed { .. } => vec![],
            Node::Matmul { x, .. }
            | Node::Param { x, .. }
            | Node::AddBias { x, .. }
            | Node::RmsNorm { x, .. }
            | Node::Rope { x, .. }
            | Node::Scale { x, .. }
            | Node::Softcap { x, .. }
            | Node::Rows { x, .. } => vec![x],
            Node::Attention { q, k, v, .. } => vec![q, k, v],
            Node::Glu { gate, up, .. } => vec![gate, up],
            Node::Add { a, b } => vec![a, b],
        }
    }
}

/// One sequence's recording: the nodes since [`GpuTape::clear`], their outputs' shapes
/// (`[rows, cols]`) and the step's id lists.
#[derive(Debug)]
pub struct GpuTape {
    pub(crate) gpu: Arc<Gpu>,
    pub(crate) tensor_cores: bool,
    /// The most bytes of logits the loss head holds at once.
    pub(crate) head_chunk_bytes: usize,
    pub(crate) nodes: Vec<Node>,
    pub(crate) shapes: Vec<[usize; 2]>,
    pub(crate) ids: Vec<Vec<u32>>,
    /// Each trainable parameter's `[rows, cols]` (`[n_out, n_in]` of its product), set by
    /// the engine that holds them.
    pub(crate) param_shapes: Vec<[usize; 2]>,
    /// RoPE's frequency tables, made once per (rotated dims, base, scale).
    freqs: HashMap<(usize, u32, u32), Arc<GpuTensor>>,
}

impl GpuTape {
    pub(crate) fn new(gpu: Arc<Gpu>, tensor_cores: bool, head_chunk_bytes: usize) -> GpuTape {
        GpuTape {
            gpu,
            tensor_cores,
            head_chunk_bytes,
            nodes: Vec::new(),
            shapes: Vec::new(),
            ids: Vec::new(),
            param_shapes: Vec::new(),
            freqs: HashMap::new(),
        }
    }

    /// Forgets the recorded step.
    pub fn clear(&mut self) {
        self.nodes.clear();
        self.shapes.clear();
        self.ids.clear();
    }

    fn push(&mut self, node: Node, shape: [usize; 2]) -> GpuValue {
        self.nodes.push(node);
        self.shapes.push(shape);
        GpuValue(self.nodes.len() - 1)
    }

    fn shape(&self, x: &GpuValue) -> [usize; 2] {
        self.shapes[x.0]
    }
}

fn matrix(w: &GpuTapeWeight) -> &Arc<GpuWeight> {
    match w {
        GpuTapeWeight::Matrix(m) => m,
        other => panic!("the graph multiplies {other:?} where it reads a frozen matrix"),
    }
}

fn vector(w: &GpuTapeWeight) -> &Arc<GpuTensor> {
    match w {
        GpuTapeWeight::Vector(v) => v,
        other => panic!("the graph reads {other:?} where it reads a frozen vector"),
    }
}

impl Sequence for GpuTape {
    type Weight = GpuTapeWeight;
    type Tensor = GpuValue;
    type Ids = GpuIds;

    fn ids(&mut self, ids: &[u32]) -> GpuIds {
        self.ids.push(ids.to_vec());
        GpuIds(self.ids.len() - 1)
    }

    fn embed(&mut self, table: &GpuTapeWeight, ids: &GpuIds) -> GpuValue {
        let table = matrix(table);
        let shape = [self.ids[ids.0].len(), table.shape.n_in];
        let node = Node::Embed {
            table: Arc::clone(table),
            ids: ids.0,
        };
        self.push(node, shape)
    }

    fn matmul(&mut self, w: &GpuTapeWeight, x: &GpuValue) -> GpuValue {
        let [rows, cols] = self.shape(x);
        match w {
            GpuTapeWeight::Matrix(m) => {
                assert_eq!(cols, m.shape.n_in, "matmul: input width vs weight rows");
                let node = Node::Matmul {
                    w: Arc::clone(m),
                    x: x.0,
                };
                self.push(node, [rows, m.shape.n_out])
            }
            &GpuTapeWeight::Param { id, scale, dropout } => {
                let [n_out, n_in] = self.param_shapes[id];
                assert_eq!(cols, n_in, "matmul: input width vs parameter {id}");
                let node = Node::Param {
                    id,
                    scale,
                    dropout,
                    x: x.0,
                };
                self.push(node, [rows, n_out])
            }
            GpuTapeWeight::Vector(_) => panic!("the graph multiplies a vector"),
        }
    }

    fn add_bias(&mut self, x: &GpuValue, bias: &GpuTapeWeight) -> GpuValue {
        let shape = self.shape(x);
        let node = Node::AddBias {
            x: x.0,
            bias: Arc::clone(vector(bias)),
        };
        self.push(node, shape)
    }

    fn rms_norm(&mut self, x: &GpuValue, p: &RmsNormParams<'_, GpuTapeWeight>) -> GpuValue {
        let shape = self.shape(x);
        let norm = RmsNorm {
            n: p.group,
            n_rows: shape[0] * shape[1] / p.group,
            eps: p.eps,
        };
        let node = Node::RmsNorm {
            x: x.0,
            norm,
            gain: p.weight.map(|w| Arc::clone(vector(w))),
        };
        self.push(node, shape)
    }

    fn rope(&mut self, x: &GpuValue, positions: &GpuIds, p: &RopeParams) -> GpuValue {
        let shape = self.shape(x);
        let rope = Rope {
            style: p.style,
            head_dim: p.head_dim,
            n_rot: p.n_rot,
            n_heads: shape[1] / p.head_dim,
            n_tokens: shape[0],
        };
        let key = (p.n_rot, p.base.to_bits(), p.freq_scale.to_bits());
        let gpu = &self.gpu;
        let freqs = self.freqs.entry(key).or_insert_with(|| {
            let f = rope_freqs(p.n_rot, f64::from(p.base), f64::from(p.freq_scale), None);
            Arc::new(GpuTensor::from_f32(gpu, &[f.len()], &f))
        });
        let node = Node::Rope {
            x: x.0,
            rope,
            positions: positions.0,
            freqs: Arc::clone(freqs),
        };
        self.push(node, shape)
    }

    fn attention(
        &mut self,
        x: AttentionInputs<'_, GpuValue, GpuIds>,
        p: &AttentionParams,
    ) -> GpuValue {
        let n = self.ids[x.positions.0].len();
        let attn = train_attention(n, p);
        let node = Node::Attention {
            q: x.q.0,
            k: x.k.0,
            v: x.v.0,
            attn,
            positions: x.positions.0,
        };
        self.push(node, [n, p.n_head * p.head_dim_v])
    }

    fn glu(&mut self, gate: &GpuValue, up: &GpuValue, act: Activation) -> GpuValue {
        let shape = self.shape(gate);
        let node = Node::Glu {
            gate: gate.0,
            up: up.0,
            act,
        };
        self.push(node, shape)
    }

    fn add(&mut self, a: &GpuValue, b: &GpuValue) -> GpuValue {
        let shape = self.shape(a);
        self.push(Node::Add { a: a.0, b: b.0 }, shape)
    }

    fn scale(&mut self, x: &GpuValue, s: f32) -> GpuValue {
        let shape = self.shape(x);
        self.push(Node::Scale { x: x.0, s }, shape)
    }

    fn softcap(&mut self, x: &GpuValue, cap: f32) -> GpuValue {
        let shape = self.shape(x);
        self.push(Node::Softcap { x: x.0, cap }, shape)
    }

    fn rows(&mut self, x: &GpuValue, range: Range<usize>) -> GpuValue {
        let cols = self.shape(x)[1];
        let node = Node::Rows {
            x: x.0,
            start: range.start,
        };
        self.push(node, [range.len(), cols])
    }

    /// The tape's values exist only inside the engine's built step.
    fn read(&mut self, _x: &GpuValue) -> Result<Vec<f32>> {
        Err(ModelError::Unsupported(
            "reading a value of the GPU training tape (its engine runs the step)".into(),
        ))
    }
}
