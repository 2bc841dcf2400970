//! Which recorded nodes the lowering emits as one fused kernel.
//!
//! A decode step of a small model is a chain of small kernels, each costing its launch and
//! barrier and its own round trips to memory however little it does (docs/PERF.md, section
//! 2: the dispatch floor), so the lowering folds these patterns
//! of the graph's plain ops into one kernel each, without changing what they compute:
//!
//! - `embed -> scale` (Gemma's sqrt(d_model)): the gather multiplies as it stores (the
//!   kernel's scale parameter: one f32 multiply per value either way);
//! - `[rms_norm(a)] -> add(h, .) -> [rms_norm(sum)]`: the residual add with the block's
//!   post-norm (Gemma) and the next norm, one `residual_norm` op, `h` updated in place (with
//!   q8 inputs the op also writes the next norm's q8 copy where a decode product reads it:
//!   `plan.rs`, `Lower::residual`);
//! - `[per-head rms_norm] -> rope` of q, then of k: one `head_norm_rope` op for both;
//! - `matmul(gate) -> matmul(up) -> glu(gate, up)` of one token, gate and up consecutive
//!   rows of one stacked upload (`weight.rs`) read by nothing but the GLU: one matvec over
//!   gate|up that stores the GLU (the kernels' GLU epilogue, `matvec_glu_out`;
//!   [`Fuse::GluStack`]), so the down projection is a plain product. It takes precedence
//!   over the next pattern (`GpuOptions::glu_epilogue`); a prompt block keeps the product
//!   and the `glu` apart. With q8 inputs the gate|up matvec reads its input's q8 copy, and
//!   a down projection of up to 4 MB reads the GLU in f32 ([`Fusion::keep_f32`]: a quantize
//!   dispatch would cost more there, as for `matvec_glu`), a larger one a q8 copy;
//! - `glu(gate, up) -> matmul` of one token: the down projection reads `act(gate) * up`
//!   as its input (`matvec_glu`), for down projections of up to 4 MB (see
//!   [`GLU_FUSE_MAX_BYTES`]); with q8 inputs, larger ones read a q8 copy of the GLU made by
//!   one quantize dispatch that computes it (`quantize_q8_glu`);
//! - `matmul -> add_bias` (Qwen 2's q/k/v): the matvec or tiled matmul adds the bias as it
//!   stores each row (the kernels' bias epilogue), bit for bit the separate add. A matmul
//!   that reads the GLU keeps its separate bias add (that kernel has no bias binding);
//! - `matmul`s of one input whose weights are consecutive rows of one stacked upload (q|k|v
//!   or gate|up, `weight.rs`), each with or without its folded bias (all alike, the biases
//!   rows of one stacked bias): one product over their rows, each projection's rows into its
//!   own place ([`Fuse::Stack`]; the kernels' split outputs, or one output in decode, where
//!   the places are contiguous). It is found after the patterns above, so a stacked q and k
//!   still feed `head_norm_rope`, and a stacked gate and up the `matvec_glu` of their down
//!   projection;
//! - the K/V append of an attention whose k is a `head_norm_rope`'s output, read whole at the
//!   same positions, with v ready before that op: the op stores k's finished heads and v's
//!   into the cache (`head_norm_rope_kv`, [`Fuse::Rope`]'s `append`) and the attention only
//!   attends ([`Fuse::Attend`]). Found last, over the other patterns' emission points, and
//!   only when the lowering asks for it (`GpuOptions::fold_kv_append`);
//! - in decode (one token), that rope op itself (norm + RoPE of q and k, K/V store) into the
//!   attention that reads q and k and nothing else does: the attention kernel does it all
//!   before its key loop (`attention_rope`, [`Fuse::RopeAttend`]), q and k never stored.
//!   Found right after the K/V appends, for the ops `GpuOptions::fold_rope_attention` names
//!   (by default every one: [`RopeAttention`]);
//! - a decode step's Llama-style residual op (above, without a norm of its addend) into the
//!   product that makes the addend, an o or down projection, row by row: the matvec adds
//!   each row to h and stores the norm's z = h' * w_out and per workgroup the sum of its
//!   rows' h'^2, and every product that reads the norm takes those and scales its row totals
//!   by 1 / rms(h') (the kernels' residual epilogue and scaled input, `matvec_residual`;
//!   [`Fuse::ResidualRows`], [`Fusion::scaled_input`]). Found after the K/V and rope folds,
//!   and only when the lowering asks for it (`GpuOptions::residual_rows`);
//! - a decode step's residual op (above) that is left and whose norm a product reads, with
//!   or without a norm of its own operand (Gemma's post-norm, Llama's plain add): the first
//!   product that reads the norm computes the add and the norm as it reads its input (the
//!   operand's own scale reduced by every workgroup before its loop), and stores h and the
//!   normed vector for the later readers ([`ResidualOp`]; `matvec/x_norm.wgsl`), where the
//!   product is small enough ([`NORM_FUSE_MAX_BYTES`]). Found last, and only when the
//!   lowering asks for it (`GpuOptions::fold_norm`).
//!
//! - a decode add of a product of a product that nothing else reads and a value stored
//!   before it (a LoRA update, `y + B·(A·x)`; no model's own graph has one): the `B`
//!   product's matvec adds the value as it stores each row
//!   (the bias epilogue reading an activation; [`Fuse::Accumulate`]). Found last, over what the
//!   other patterns left.
//!
//! A node folds only when its value has no other reader and the shapes are whole rows, so
//! every other graph lowers as before. [`Fusion::emit_at`] says where each node's work
//! happens, which the lowering's liveness follows.

use rullama_kernels::ops::matvec::{ROWS, glu_out_supported, q8_supported};
use rullama_kernels::ops::unary::UnaryOp;

use super::ir::{Key, Node, Src};
use super::weight::GpuWeightRef;
use super::{GpuOptions, RopeAttention};

/// The largest down projection that reads the GLU as its input. Each of its workgroups (4
/// rows) recomputes `act(gate) * up` for the whole input, so the GLU's reads grow with the
/// rows: at Q4_K 14336x4096 the fused kernel is slower than glu + matvec, while at 2048x640
/// (0.7 MB) the saved dispatch wins (docs/PERF.md, D-glu-input-bound).
const GLU_FUSE_MAX_BYTES: u64 = 4 << 20;

/// The most bytes a product's workgroups may read besides its plain input for a folded
/// norm: each of them reads h and the gain (n_in floats each) beside `a`, and with the
/// operand's own norm a second time and that norm's gain, so the reads grow with
/// rows * n_in / 4 while the saved dispatch is a fixed few microseconds.
/// SmolLM2-135M's gate|up (3072 x 576) reads 3.5 MB more, gemma-3-270m's (4096 x 640, with
/// its post-norm) 10.5 MB, qwen2.5-0.5b's 17 MB, an LM head hundreds.
const NORM_FUSE_MAX_BYTES: u64 = 12 << 20;

/// A residual op `h + [rms_norm(a)]` computed inside a product (emitted there): by the
/// product that reads its norm first ([`Fusion::norm_input`]), or row by row by the product
/// that makes its addend ([`Fuse::ResidualRows`]). The add node, the operand's own norm
/// folded into it if any, and the norm after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ResidualOp {
    pub add: usize,
    pub pre: Option<usize>,
    pub out: usize,
}

/// The nodes that read value `v`.
fn readers(key: &Key, v: usize) -> impl Iterator<Item = usize> + '_ {
    (0..key.nodes.len()).filter(move |&r| key.nodes[r].inputs().iter().any(|s| s.value == v))
}

/// What the lowering does at a node.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Fuse {
    /// Lowered as itself.
    Plain,
    /// Computed inside another node's fused kernel (emitted there).
    Folded,
    /// Computed by another node's fused kernel, which sets its location: an earlier one, or
    /// the product a residual op folds into ([`ResidualOp`]).
    Done,
    /// The add: `h += [rms_norm(pre)]`, then `[out = rms_norm(h)]`.
    Residual {
        pre: Option<usize>,
        out: Option<usize>,
    },
    /// Norm and RoPE of q (and k) in place; emitted at q's first node. `append`: the
    /// attention node whose K/V append the op does as well (k's finished heads and v's into
    /// that layer's cache).
    Rope {
        q: RopeUnit,
        k: Option<RopeUnit>,
        append: Option<usize>,
    },
    /// An attention whose K and V an earlier rope op stored: it only attends.
    Attend,
    /// A decode attention that norms and rotates q and k itself and stores k and v into its
    /// cache before attending; the units' nodes are folded into it (emitted here).
    RopeAttend { q: RopeUnit, k: RopeUnit },
    /// The matmul (one token) with the GLU node folded into its input: read as the matvec
    /// goes, or (`q8`) quantized once by a dispatch of its own that computes it.
    GluDown { glu: usize, q8: bool },
    /// The matmul with the `add_bias` node `bias` folded into its output (which is then
    /// `bias`'s value; the product alone is never stored).
    Biased { bias: usize },
    /// The matmul (one token) whose only reader is the add node `add`, which adds it to
    /// `other`: the matvec adds `other` as it stores each row (the bias epilogue, reading an
    /// activation), and its output is `add`'s value.
    Accumulate { add: usize, other: Src },
    /// One product for the matmuls `parts` (this node first, then later ones reading the
    /// same input, their weights consecutive rows of one stacked upload); each part's value
    /// lands in its own place. The later parts are `Done`.
    Stack { parts: Vec<StackPart> },
    /// The embedding gather with the `unary` scale node `scale` folded into its store (whose
    /// value it then is).
    ScaledEmbed { scale: usize },
    /// The gate matmul (one token), whose matvec over gate|up (up's weight the rows after
    /// its own in one stacked upload) stores the `glu` node's value: gate's and up's values
    /// are folded, `up` and `glu` are `Done`.
    GluStack { up: usize, glu: usize },
    /// The matmul (one token) whose value is the addend of a Llama-style residual op, which
    /// its matvec does row by row (the residual epilogue, `matvec_residual`): h updated, the
    /// norm's z and partial sums stored, which the norm's readers take as their input
    /// ([`Fusion::scaled_input`]). Its own value is folded, the add and the norm are `Done`.
    ResidualRows(ResidualOp),
}

/// One projection of a stacked product: its matmul node and the `add_bias` node folded into
/// it, if any (whose value is then the part's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StackPart {
    pub matmul: usize,
    pub bias: Option<usize>,
}

impl StackPart {
    /// The node whose value the part's output is.
    pub fn value(&self) -> usize {
        self.bias.unwrap_or(self.matmul)
    }
}

/// An optional per-head norm and the RoPE after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RopeUnit {
    pub norm: Option<usize>,
    pub rope: usize,
}

impl RopeUnit {
    pub fn first(&self) -> usize {
        self.norm.unwrap_or(self.rope)
    }

    /// The activation the unit rotates (the norm's input, or the rope's).
    pub fn input(&self, nodes: &[Node]) -> Src {
        match &nodes[self.first()] {
            Node::RmsNorm { x, .. } | Node::Rope { x, .. } => *x,
            _ => unreachable!("a rope unit starts with a norm or a rope"),
        }
    }
}

/// The fused lowering of one key.
#[derive(Debug)]
pub(crate) struct Fusion {
    pub fuse: Vec<Fuse>,
    /// The value is made and used inside one fused kernel only: no buffer holds it.
    pub folded: Vec<bool>,
    /// Decode products read the value as f32 even with q8 inputs: a GLU stored by the
    /// gate|up matvec for a down projection of up to [`GLU_FUSE_MAX_BYTES`], where a quantize
    /// dispatch would cost more than the q8 product saves (the reason `matvec_glu` reads
    /// f32 there too).
    pub keep_f32: Vec<bool>,
    /// The node whose lowering computes each node's value.
    pub emit_at: Vec<usize>,
    /// For a product (a matmul lowered as itself, with its bias, or as a stack's first
    /// part): the residual op it computes its input from.
    pub norm_input: Vec<Option<ResidualOp>>,
    /// For a product: the norm node whose value it reads as a residual epilogue's z and
    /// partial sums ([`Fuse::ResidualRows`]).
    pub scaled_input: Vec<Option<usize>>,
}

impl Fusion {
    /// The fusions of `key` under `options`: K/V appends into the rope op where they fit
    /// (`fold_kv_append`); a decode GLU into the gate|up matvec where it can
    /// (`glu_epilogue`); big GLU down projections folded too where decode matvecs read q8
    /// copies of their inputs (`q8_inputs`).
    pub fn plan(key: &Key, options: &GpuOptions) -> Fusion {
        let nodes = &key.nodes;
        let n = nodes.len();
        let mut uses = vec![0usize; n];
        for node in nodes {
            for s in node.inputs() {
                uses[s.value] += 1;
            }
        }
        uses[key.target.value] += 1;
        let mut f = Fusion {
            fuse: vec![Fuse::Plain; n],
            folded: vec![false; n],
            keep_f32: vec![false; n],
            emit_at: (0..n).collect(),
            norm_input: vec![None; n],
            scaled_input: vec![None; n],
        };
        let whole = |s: &Src| s.row0 == 0 && s.rows == key.shapes[s.value].0;
        for i in 0..n {
            if f.fuse[i] != Fuse::Plain {
                continue;
            }
            match &nodes[i] {
                Node::Add { a, b } => f.residual(key, &uses, i, *a, *b, &whole),
                Node::RmsNorm { .. } | Node::Rope { .. } => f.rope(key, &uses, i, &whole),
                Node::Glu { .. } => {
                    // The GLU epilogue first: it folds the glu without making the down
                    // projection recompute it.
                    let stored = options.glu_epilogue && f.glu_stack(key, &uses, i, &whole);
                    if !stored && uses[i] == 1 {
                        f.glu_down(key, i, options.q8_inputs, &whole);
                    }
                }
                Node::AddBias { x, .. } if uses[x.value] == 1 => f.bias(key, i, *x, &whole),
                Node::Unary {
                    x,
                    op: UnaryOp::Scale,
                    ..
                } if uses[x.value] == 1 => f.scaled_embed(key, i, *x, &whole),
                _ => {}
            }
        }
        for i in 0..n {
            f.stack(key, i);
        }
        if options.fold_kv_append {
            for i in 0..n {
                f.append(key, i, &whole);
            }
            if options.fold_rope_attention != RopeAttention::Off {
                let normed = options.fold_rope_attention == RopeAttention::All;
                for i in 0..n {
                    f.rope_attend(key, &uses, i, normed, &whole);
                }
            }
        }
        // With q8 inputs a separate residual op stays: it writes its readers' q8 copy.
        if options.residual_rows && !options.q8_inputs {
            for i in 0..n {
                f.residual_rows(key, &uses, i, &whole);
            }
        }
        if options.fold_norm {
            for i in 0..n {
                f.norm_into(key, i, options.q8_inputs, &whole);
            }
        }
        for i in 0..n {
            f.accumulate(key, &uses, i, &whole);
        }
        f
    }

    fn free(&self, i: usize) -> bool {
        self.fuse[i] == Fuse::Plain
    }

    fn residual(
        &mut self,
        key: &Key,
        uses: &[usize],
        i: usize,
        a: Src,
        b: Src,
        whole: &impl Fn(&Src) -> bool,
    ) {
        let nodes = &key.nodes;
        let cols = key.shapes[i].1;
        if a.value == b.value || !whole(&a) || !whole(&b) {
            return;
        }
        // A whole-row weighted norm of a value nothing else reads.
        let row_norm = |v: usize| match &nodes[v] {
            Node::RmsNorm {
                x,
                weight: Some(_),
                group,
                eps,
            } if *group == cols && whole(x) => Some(*eps),
            _ => None,
        };
        let pre = [a.value, b.value]
            .into_iter()
            .find(|&v| uses[v] == 1 && self.free(v) && row_norm(v).is_some());
        let out = (i + 1 < nodes.len())
            .then_some(i + 1)
            .filter(|&o| match &nodes[o] {
                Node::RmsNorm { x, .. } => x.value == i && whole(x),
                _ => false,
            })
            .filter(|&o| row_norm(o).is_some());
        // One eps serves both norms.
        if let (Some(p), Some(o)) = (pre, out)
            && row_norm(p) != row_norm(o)
        {
            return;
        }
        if pre.is_none() && out.is_none() {
            return;
        }
        if let Some(p) = pre {
            self.fuse[p] = Fuse::Folded;
            self.folded[p] = true;
            self.emit_at[p] = i;
        }
        if let Some(o) = out {
            self.fuse[o] = Fuse::Done;
            self.emit_at[o] = i;
        }
        self.fuse[i] = Fuse::Residual { pre, out };
    }

    /// A rope unit starting at `i`: a per-head norm read only by the rope after it, or a
    /// rope alone.
    fn rope_unit(
        &self,
        key: &Key,
        uses: &[usize],
        i: usize,
        whole: &impl Fn(&Src) -> bool,
    ) -> Option<RopeUnit> {
        let nodes = &key.nodes;
        if !self.free(i) {
            return None;
        }
        match &nodes[i] {
            Node::Rope { x, .. } if whole(x) => Some(RopeUnit {
                norm: None,
                rope: i,
            }),
            Node::RmsNorm {
                x,
                weight: Some(_),
                group,
                ..
            } if whole(x) && key.shapes[i].1.is_multiple_of(*group) && uses[i] == 1 => {
                match nodes.get(i + 1) {
                    Some(Node::Rope { x: r, spec, .. })
                        if r.value == i && whole(r) && spec.head_dim == *group =>
                    {
                        Some(RopeUnit {
                            norm: Some(i),
                            rope: i + 1,
                        })
                    }
                    _ => None,
                }
            }
            _ => None,
        }
    }

    fn rope(&mut self, key: &Key, uses: &[usize], i: usize, whole: &impl Fn(&Src) -> bool) {
        let Some(q) = self.rope_unit(key, uses, i, whole) else {
            return;
        };
        let nodes = &key.nodes;
        let same = |a: &RopeUnit, b: &RopeUnit| match (&nodes[a.rope], &nodes[b.rope]) {
            (
                Node::Rope {
                    pos: pa, spec: sa, ..
                },
                Node::Rope {
                    pos: pb, spec: sb, ..
                },
            ) => {
                let eps = |u: &RopeUnit| match u.norm.map(|n| &nodes[n]) {
                    Some(Node::RmsNorm { eps, .. }) => Some(*eps),
                    _ => None,
                };
                pa == pb && sa == sb && eps(a) == eps(b)
            }
            _ => false,
        };
        // k's unit right after q's, on a value computed before q's unit starts.
        let k = self
            .rope_unit(key, uses, q.rope + 1, whole)
            .filter(|k| same(&q, k) && k.input(nodes).value < q.first());
        for unit in [Some(q), k].into_iter().flatten() {
            if let Some(n) = unit.norm {
                self.fuse[n] = Fuse::Folded;
                self.folded[n] = true;
                self.emit_at[n] = q.first();
            }
            self.fuse[unit.rope] = Fuse::Done;
            self.emit_at[unit.rope] = q.first();
        }
        self.fuse[q.first()] = Fuse::Rope { q, k, append: None };
    }

    /// The rope op at `i` also appends to the cache of the attention that reads its k: that
    /// attention's k is the op's k whole, its positions the op's, its head shape the cache's,
    /// and its v (rows like k's) is made before the op runs.
    fn append(&mut self, key: &Key, i: usize, whole: &impl Fn(&Src) -> bool) {
        let Fuse::Rope {
            q,
            k: Some(k),
            append: None,
        } = self.fuse[i]
        else {
            return;
        };
        let nodes = &key.nodes;
        let Node::Rope { pos, spec, .. } = &nodes[k.rope] else {
            return;
        };
        let attention = nodes
            .iter()
            .enumerate()
            .skip(k.rope + 1)
            .find_map(|(a, n)| match n {
                Node::Attention(at) if at.k.value == k.rope => Some((a, at)),
                _ => None,
            });
        let Some((a, at)) = attention else {
            return;
        };
        let l = at.kv.layout;
        let fits = self.free(a)
            && at.pos == *pos
            && whole(&at.k)
            && whole(&at.v)
            && (at.v.rows, at.v.cols) == (at.k.rows, at.k.cols)
            && l.head_dim == spec.head_dim
            && at.k.cols == l.n_kv_heads * l.head_dim
            && !self.folded[at.v.value]
            && self.emit_at[at.v.value] < i;
        if fits {
            self.fuse[i] = Fuse::Rope {
                q,
                k: Some(k),
                append: Some(a),
            };
            self.fuse[a] = Fuse::Attend;
        }
    }

    /// The GLU node `g` of one token whose gate and up are matmuls of one input over
    /// consecutive rows of one stacked upload (gate's first, as many as up's, in one weight
    /// chunk: `glu_out_supported`), each read whole and by nothing else: the gate matmul's
    /// matvec stores the GLU ([`Fuse::GluStack`]). Whether it did.
    fn glu_stack(
        &mut self,
        key: &Key,
        uses: &[usize],
        g: usize,
        whole: &impl Fn(&Src) -> bool,
    ) -> bool {
        let nodes = &key.nodes;
        let Node::Glu { gate, up, .. } = &nodes[g] else {
            return false;
        };
        let (a, b) = (gate.value, up.value);
        let (Node::Matmul { w: wa, x: xa }, Node::Matmul { w: wb, x: xb }) = (&nodes[a], &nodes[b])
        else {
            return false;
        };
        let stacked = wb.shares(wa)
            && wa.rows.end == wb.rows.start
            && wa.rows.len() == wb.rows.len()
            && wa
                .matrix_rows()
                .is_some_and(|r| glu_out_supported(r.w.rows(wa.rows.start..wb.rows.end)));
        let fits = a != b
            && xa == xb
            && xa.rows == 1
            && whole(gate)
            && whole(up)
            && uses[a] == 1
            && uses[b] == 1
            && self.free(a)
            && self.free(b)
            && stacked;
        if !fits {
            return false;
        }
        for v in [a, b] {
            self.folded[v] = true;
            self.emit_at[v] = a;
        }
        self.fuse[a] = Fuse::GluStack { up: b, glu: g };
        self.fuse[b] = Fuse::Done;
        self.fuse[g] = Fuse::Done;
        self.emit_at[g] = a;
        // Read by small down projections only: f32 inputs (no quantize dispatch).
        self.keep_f32[g] = nodes.iter().all(|node| match node {
            Node::Matmul { w, x } if x.value == g => {
                w.matrix_bytes().is_some_and(|b| b <= GLU_FUSE_MAX_BYTES)
            }
            _ => true,
        });
        true
    }

    /// The rope op at `i` (with its K/V append) into that attention, for one token: the
    /// attention reads q (the op's q, whole) and k, and nothing else reads the rotated q or
    /// k (the kernel keeps them in registers); an op with q/k norms only where `normed`
    /// says. The units' inputs are then read at the attention, which the liveness follows
    /// through `emit_at`.
    fn rope_attend(
        &mut self,
        key: &Key,
        uses: &[usize],
        i: usize,
        normed: bool,
        whole: &impl Fn(&Src) -> bool,
    ) {
        let Fuse::Rope {
            q,
            k: Some(k),
            append: Some(a),
        } = self.fuse[i]
        else {
            return;
        };
        let nodes = &key.nodes;
        let Node::Attention(at) = &nodes[a] else {
            return;
        };
        let has_norms = q.norm.is_some() || k.norm.is_some();
        let fits = (normed || !has_norms)
            && at.q.value == q.rope
            && whole(&at.q)
            && at.q.rows == 1
            && uses[q.rope] == 1
            && uses[k.rope] == 1
            && q.input(nodes).rows == 1;
        if !fits {
            return;
        }
        for unit in [q, k] {
            for n in [unit.norm, Some(unit.rope)].into_iter().flatten() {
                self.fuse[n] = Fuse::Folded;
                self.folded[n] = true;
                self.emit_at[n] = a;
            }
        }
        self.fuse[a] = Fuse::RopeAttend { q, k };
    }

    fn glu_down(&mut self, key: &Key, g: usize, q8_inputs: bool, whole: &impl Fn(&Src) -> bool) {
        let down = key
            .nodes
            .iter()
            .enumerate()
            .skip(g + 1)
            .find(|(_, node)| node.inputs().iter().any(|s| s.value == g));
        let Some((d, Node::Matmul { x, w })) = down else {
            return;
        };
        let small = w.matrix_bytes().is_some_and(|b| b <= GLU_FUSE_MAX_BYTES);
        let q8 = q8_inputs && !small && w.matrix().is_some_and(|m| q8_supported(m.shape.format));
        if (small || q8) && w.is_whole() && x.value == g && x.rows == 1 && whole(x) && self.free(d)
        {
            self.fuse[g] = Fuse::Folded;
            self.folded[g] = true;
            self.emit_at[g] = d;
            self.fuse[d] = Fuse::GluDown { glu: g, q8 };
        }
    }

    /// The rows the product at node `j` computes, if it is one lowered at its own node (with
    /// its bias, as a stack, or gate|up with the GLU epilogue).
    fn product_rows(&self, key: &Key, j: usize) -> Option<usize> {
        match &self.fuse[j] {
            Fuse::Plain | Fuse::Biased { .. } => Some(key.shapes[j].1),
            Fuse::Stack { parts } => Some(parts.iter().map(|p| key.shapes[p.matmul].1).sum()),
            Fuse::GluStack { .. } => Some(2 * key.shapes[j].1),
            _ => None,
        }
        .filter(|_| matches!(key.nodes[j], Node::Matmul { .. }))
    }

    /// A Llama-style residual op at `i` (no norm of its addend, a norm after it) into the
    /// product that makes its addend, row by row ([`Fuse::ResidualRows`]): one token of whole
    /// units of 32; the addend a whole-row product of one weight chunk lowered at its own node
    /// as a plain matvec that nothing else reads, with h made before it; every reader of the
    /// norm a product lowered at its own node that reads it whole (then through the scaled
    /// input), their workgroups' reads of the partial sums within [`NORM_FUSE_MAX_BYTES`].
    fn residual_rows(
        &mut self,
        key: &Key,
        uses: &[usize],
        i: usize,
        whole: &impl Fn(&Src) -> bool,
    ) {
        let Fuse::Residual {
            pre: None,
            out: Some(o),
        } = self.fuse[i]
        else {
            return;
        };
        let nodes = &key.nodes;
        let (rows, cols) = key.shapes[i];
        let Node::Add { a, b } = &nodes[i] else {
            return;
        };
        let product = |v: usize| matches!(nodes[v], Node::Matmul { .. });
        let (m, h) = match (product(a.value), product(b.value)) {
            (true, false) => (a.value, b),
            (false, true) => (b.value, a),
            _ => return,
        };
        let Node::Matmul { w, x } = &nodes[m] else {
            return;
        };
        let one_chunk = w.matrix().is_some_and(|w| w.chunks.len() == 1);
        // A product reading another such norm has no residual epilogue (its input would be
        // the scaled one): the epilogue's matvec reads a plain vector.
        if rows != 1
            || !cols.is_multiple_of(32)
            || !self.free(m)
            || self.scaled_input[m].is_some()
            || uses[m] != 1
            || !w.is_whole()
            || !one_chunk
            || !whole(x)
            || self.emit_at[h.value] >= m
        {
            return;
        }
        // The readers' products, and the partial sums their workgroups read.
        let partials = cols.div_ceil(ROWS);
        let mut products = Vec::new();
        let mut reads = 0u64;
        for r in readers(key, o) {
            let j = self.emit_at[r];
            let reads_o = matches!(&nodes[j], Node::Matmul { x, .. } if x.value == o && whole(x));
            let Some(product_rows) = self.product_rows(key, j).filter(|_| reads_o) else {
                return;
            };
            if !products.contains(&j) {
                products.push(j);
                reads += (product_rows.div_ceil(ROWS) * partials * 4) as u64;
            }
        }
        if products.is_empty() || reads > NORM_FUSE_MAX_BYTES {
            return;
        }
        for j in products {
            self.scaled_input[j] = Some(o);
        }
        self.fuse[m] = Fuse::ResidualRows(ResidualOp {
            add: i,
            pre: None,
            out: o,
        });
        self.folded[m] = true;
        self.fuse[i] = Fuse::Done;
        self.emit_at[i] = m;
        self.emit_at[o] = m;
    }

    /// The residual op at `i` into the product that reads its norm first: one token of
    /// whole units of 32, a product lowered at its own node that reads the norm whole, f32
    /// inputs (a q8 copy would need the norm first), and extra reads within
    /// [`NORM_FUSE_MAX_BYTES`]. The operand's own norm (`pre`) goes along: its input is then
    /// read at the product.
    fn norm_into(&mut self, key: &Key, i: usize, q8_inputs: bool, whole: &impl Fn(&Src) -> bool) {
        let Fuse::Residual { pre, out: Some(o) } = self.fuse[i] else {
            return;
        };
        let (rows, cols) = key.shapes[i];
        if rows != 1 || !cols.is_multiple_of(32) {
            return;
        }
        let nodes = &key.nodes;
        let first = readers(key, o).min_by_key(|&r| self.emit_at[r]);
        let Some(j) = first.map(|r| self.emit_at[r]) else {
            return;
        };
        let Node::Matmul { w, x } = &nodes[j] else {
            return;
        };
        let Some(product_rows) = self.product_rows(key, j) else {
            return;
        };
        let Some(m) = w.matrix() else {
            return;
        };
        // h and the gain; with the operand's norm, a once more (its scale) and that gain.
        let vectors = if pre.is_some() { 4 } else { 2 };
        let reads = (product_rows.div_ceil(ROWS) * vectors * cols * 4) as u64;
        let q8 = q8_inputs && q8_supported(m.shape.format);
        if x.value != o || !whole(x) || q8 || reads > NORM_FUSE_MAX_BYTES {
            return;
        }
        self.norm_input[j] = Some(ResidualOp {
            add: i,
            pre,
            out: o,
        });
        self.fuse[i] = Fuse::Done;
        for v in [Some(i), pre, Some(o)].into_iter().flatten() {
            self.emit_at[v] = j;
        }
    }

    /// An add node `i` left to itself, of one token, one of whose operands is a whole-row
    /// product of a whole weight, of another product's output, lowered at its own node and
    /// read by nothing else, the other an operand stored before that product runs: the
    /// product adds it as it stores its rows ([`Fuse::Accumulate`]), bit for bit the separate
    /// add. (A LoRA update `y + B·(A·x)`.)
    fn accumulate(&mut self, key: &Key, uses: &[usize], i: usize, whole: &impl Fn(&Src) -> bool) {
        let nodes = &key.nodes;
        let Node::Add { a, b } = &nodes[i] else {
            return;
        };
        if !self.free(i) || a.value == b.value || !whole(a) || !whole(b) || key.shapes[i].0 != 1 {
            return;
        }
        for (m, other) in [(a.value, *b), (b.value, *a)] {
            let Node::Matmul { w, x } = &nodes[m] else {
                continue;
            };
            // Only a product of another product's output: LoRA's `B·(A·x)`. The models'
            // own products read norms, GLUs and attention outputs, so their steps lower as
            // they do without LoRA.
            let of_product = matches!(nodes[x.value], Node::Matmul { .. });
            let fits = of_product
                && self.free(m)
                && uses[m] == 1
                && w.is_whole()
                && self.norm_input[m].is_none()
                && self.scaled_input[m].is_none()
                && !self.folded[other.value]
                && self.emit_at[other.value] < m;
            if fits {
                self.producer_stores(m, i, Fuse::Accumulate { add: i, other });
                return;
            }
        }
    }

    /// `add_bias` node `b` on the whole output of a matmul that nothing else reads (and whose
    /// lowering is still free: a GLU down projection keeps its separate add).
    fn bias(&mut self, key: &Key, b: usize, x: Src, whole: &impl Fn(&Src) -> bool) {
        let m = x.value;
        if matches!(key.nodes[m], Node::Matmul { .. }) && whole(&x) && self.free(m) {
            self.producer_stores(m, b, Fuse::Biased { bias: b });
        }
    }

    /// `producer`'s lowering (`fuse`) stores the value of `consumer`, its only reader; the
    /// producer's own value is never stored.
    fn producer_stores(&mut self, producer: usize, consumer: usize, fuse: Fuse) {
        self.fuse[producer] = fuse;
        self.folded[producer] = true;
        self.fuse[consumer] = Fuse::Done;
        self.emit_at[consumer] = producer;
    }

    /// A scale node `u` of a whole gather's output that nothing else reads.
    fn scaled_embed(&mut self, key: &Key, u: usize, x: Src, whole: &impl Fn(&Src) -> bool) {
        let e = x.value;
        if matches!(key.nodes[e], Node::Embed { .. }) && whole(&x) && self.free(e) {
            self.producer_stores(e, u, Fuse::ScaledEmbed { scale: u });
        }
    }

    /// Node `i` as the part of a stacked product: a matmul lowered as itself or with its
    /// bias folded, its weight some rows of a stacked upload; with its input, weight and
    /// bias weight.
    fn stack_part<'k>(
        &self,
        key: &'k Key,
        i: usize,
    ) -> Option<(StackPart, Src, &'k GpuWeightRef, Option<&'k GpuWeightRef>)> {
        let Node::Matmul { w, x } = &key.nodes[i] else {
            return None;
        };
        let bias = match &self.fuse[i] {
            Fuse::Plain => None,
            Fuse::Biased { bias } => Some(*bias),
            _ => return None,
        };
        if w.is_whole() {
            return None;
        }
        let bias_w = match bias.map(|b| &key.nodes[b]) {
            Some(Node::AddBias { bias, .. }) => Some(bias),
            Some(_) => return None,
            None => None,
        };
        Some((StackPart { matmul: i, bias }, *x, w, bias_w))
    }

    /// A stacked product starting at matmul `i`: the later matmuls of the same input whose
    /// weights continue its rows in the same upload, with a bias where it has one (rows of
    /// the same stacked bias, aligned with the weight's).
    fn stack(&mut self, key: &Key, i: usize) {
        let Some((first, x, w, bias)) = self.stack_part(key, i) else {
            return;
        };
        let bias_fits = |w: &GpuWeightRef, b: Option<&GpuWeightRef>| match (bias, b) {
            (None, None) => true,
            (Some(b0), Some(b)) => b.shares(b0) && b.rows == w.rows,
            _ => false,
        };
        if !bias_fits(w, bias) {
            return;
        }
        let mut parts = vec![first];
        let mut end = w.rows.end;
        for j in i + 1..key.nodes.len() {
            if let Some((part, xj, wj, bj)) = self.stack_part(key, j)
                && xj == x
                && wj.shares(w)
                && wj.rows.start == end
                && bias_fits(wj, bj)
            {
                parts.push(part);
                end = wj.rows.end;
            }
        }
        if parts.len() < 2 {
            return;
        }
        for p in &parts[1..] {
            self.fuse[p.matmul] = Fuse::Done;
            self.emit_at[p.matmul] = i;
            if let Some(b) = p.bias {
                self.emit_at[b] = i;
            }
        }
        self.fuse[i] = Fuse::Stack { parts };
    }

    /// The last node whose lowering reads each value (`usize::MAX`: the step's output),
    /// with folded values read only inside their fused kernel.
    pub fn last_use(&self, key: &Key) -> Vec<Option<usize>> {
        let mut last = vec![None; key.nodes.len()];
        for (r, node) in key.nodes.iter().enumerate() {
            for s in node.inputs() {
                if self.folded[s.value] {
                    continue;
                }
                let at = self.emit_at[r];
                last[s.value] = Some(last[s.value].map_or(at, |l: usize| l.max(at)));
            }
        }
        last[key.target.value] = Some(usize::MAX);
        last
    }
}
