//! The step being recorded: a list of nodes in SSA form (node `i` produces value `i`), the
//! host's ids for the step, and the handles the graph holds.
//!
//! Nodes carry shapes and parameters but no data and no buffers: two steps that make the
//! same calls on the same shapes (every decode step, of any sequence with a cache of the
//! same shape) record equal node lists, which is the key under which the built
//! [`super::plan::Plan`] is cached and replayed. Which sequence's KV cache and token slots a
//! step uses is not part of the key: each sequence binds the plan to its own
//! ([`super::plan::Binding`]).

use rullama_kernels::Activation;
use rullama_kernels::RopeStyle;
use rullama_kernels::ops::kv::KvLayout;
use rullama_kernels::ops::unary::UnaryOp;

use super::weight::GpuWeightRef;

/// An activation handle (`Sequence::Tensor`): rows `row0..row0 + rows` of value `value` of
/// the step `step` (a `rows` range is a view, not a copy).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GpuAct {
    pub(crate) step: u64,
    pub(crate) src: Src,
}

/// Token ids or positions of one step (`Sequence::Ids`): input slot `slot` of `n` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GpuIds {
    pub(crate) step: u64,
    pub(crate) slot: usize,
    pub(crate) n: usize,
}

/// Where a node reads an activation: rows of a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Src {
    pub value: usize,
    pub row0: usize,
    pub rows: usize,
    pub cols: usize,
}

impl Src {
    pub fn len(&self) -> usize {
        self.rows * self.cols
    }
}

/// RoPE parameters as the kernel wants them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct RopeSpec {
    pub style: RopeStyle,
    pub head_dim: usize,
    pub n_rot: usize,
    pub base: f32,
    pub freq_scale: f32,
}

/// Which layer's slot of the sequence's KV cache an attention uses, and its shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct KvSlot {
    pub layer: usize,
    pub layout: KvLayout,
}

/// Attention of one layer: append k, v at the positions, then attend.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct AttnNode {
    pub kv: KvSlot,
    pub q: Src,
    pub k: Src,
    pub v: Src,
    pub pos: usize,
    pub n_head: usize,
    pub scale: f32,
    /// 0: no window.
    pub window: usize,
    /// 0: no soft-cap.
    pub softcap: f32,
}

/// One recorded op. Its output is the value with the node's index.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Node {
    Embed {
        table: GpuWeightRef,
        ids: usize,
        n: usize,
    },
    Matmul {
        w: GpuWeightRef,
        x: Src,
    },
    AddBias {
        x: Src,
        bias: GpuWeightRef,
    },
    RmsNorm {
        x: Src,
        weight: Option<GpuWeightRef>,
        eps: f32,
        group: usize,
    },
    Rope {
        x: Src,
        pos: usize,
        spec: RopeSpec,
    },
    Attention(Box<AttnNode>),
    Glu {
        gate: Src,
        up: Src,
        act: Activation,
    },
    Add {
        a: Src,
        b: Src,
    },
    Unary {
        x: Src,
        op: UnaryOp,
        value: f32,
    },
}

impl Node {
    /// The activations the node reads.
    pub fn inputs(&self) -> Vec<Src> {
        match self {
            Node::Embed { .. } => vec![],
            Node::Matmul { x, .. }
            | Node::AddBias { x, .. }
            | Node::RmsNorm { x, .. }
            | Node::Rope { x, .. }
            | Node::Unary { x, .. } => vec![*x],
            Node::Attention(a) => vec![a.q, a.k, a.v],
            Node::Glu { gate, up, .. } => vec![*gate, *up],
            Node::Add { a, b } => vec![*a, *b],
        }
    }
}

/// Where a step's ids come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum IdsInput {
    /// Written from the host before the step.
    Host(Vec<u32>),
    /// The token the last queued sampling step drew: it stays on the device.
    Drawn,
}

/// An ids slot as a plan's key sees it: how many host values, or the drawn token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum IdsKey {
    Host(usize),
    Drawn,
}

/// A step's recording: nodes, their output shapes, the ids, the first error.
#[derive(Debug, Default)]
pub(crate) struct Recording {
    pub step: u64,
    pub nodes: Vec<Node>,
    /// `(rows, cols)` of each node's output.
    pub shapes: Vec<(usize, usize)>,
    pub ids: Vec<IdsInput>,
    pub error: Option<String>,
}

impl Recording {
    pub fn new(step: u64) -> Recording {
        Recording {
            step,
            ..Recording::default()
        }
    }

    /// Appends `node` with output `[rows, cols]`; its handle.
    pub fn push(&mut self, node: Node, rows: usize, cols: usize) -> GpuAct {
        self.nodes.push(node);
        self.shapes.push((rows, cols));
        GpuAct {
            step: self.step,
            src: Src {
                value: self.nodes.len() - 1,
                row0: 0,
                rows,
                cols,
            },
        }
    }

    /// Appends an ids slot of `n` values; its handle.
    pub fn push_ids(&mut self, input: IdsInput, n: usize) -> GpuIds {
        self.ids.push(input);
        GpuIds {
            step: self.step,
            slot: self.ids.len() - 1,
            n,
        }
    }

    /// Keeps the first error of the step (reported by `read`).
    pub fn fail(&mut self, msg: String) {
        self.error.get_or_insert(msg);
    }

    /// The source behind `x`, or an error if the handle belongs to another step.
    pub fn src(&mut self, x: &GpuAct) -> Src {
        if x.step != self.step {
            self.fail(format!(
                "a tensor of step {} used in step {}",
                x.step, self.step
            ));
        }
        x.src
    }

    pub fn slot(&mut self, ids: &GpuIds) -> usize {
        if ids.step != self.step {
            self.fail(format!(
                "ids of step {} used in step {}",
                ids.step, self.step
            ));
        }
        ids.slot
    }

    /// The step's signature (what must match for a built plan to be replayed) and its ids.
    /// `sample`: the step ends in the sampling op on the target's last row.
    pub fn into_key(self, target: Src, sample: bool) -> (Key, Vec<IdsInput>) {
        let ids = self
            .ids
            .iter()
            .map(|i| match i {
                IdsInput::Host(v) => IdsKey::Host(v.len()),
                IdsInput::Drawn => IdsKey::Drawn,
            })
            .collect();
        let key = Key {
            nodes: self.nodes,
            shapes: self.shapes,
            ids,
            target,
            sample,
        };
        (key, self.ids)
    }
}

/// A plan's cache key.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Key {
    pub nodes: Vec<Node>,
    pub shapes: Vec<(usize, usize)>,
    pub ids: Vec<IdsKey>,
    pub target: Src,
    /// The step samples its target's last row on the GPU and reads back only the id (the
    /// sampling values are per-step parameters, not part of the key).
    pub sample: bool,
}
