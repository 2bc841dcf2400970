//! Sampling on the GPU: top-k, top-p, min-p, temperature and the draw over one row of logits,
//! with the CPU sampler's semantics (`crates/model/src/sampler/`, llama.cpp's chain and
//! order: top-p and min-p see the temperature-1 distribution). Only the token id is written.
//!
//! WGSL: `sampling/topk.wgsl` (selection) with a level file (`sampling/level.wgsl`, or for the
//! last level `sampling/level_draw.wgsl` + `sampling/draw.wgsl`: the draw). Selection runs in
//! levels: each workgroup of 256 puts the best [`K_MAX`] of a block of [`BLOCK`] entries
//! first, in order (a bitonic sort whose merges past `K_MAX` keep only the better half:
//! `sampling/topk.wgsl`; in registers and subgroup shuffles where the device has subgroups
//! of one size, `sampling/sort_subgroup.wgsl`, else in workgroup memory,
//! `sampling/sort_barrier.wgsl`) and keeps them; the next level does the same over those
//! lists (16 times shorter; they come sorted, so its network skips the merges up to
//! `K_MAX`) until one list of `K_MAX` is left (a 262,144 vocabulary: 256, 16, then 1
//! workgroup). That last level's workgroup then draws from its block's best (one dispatch
//! fewer than a draw of its own: 10-18 us a decode step on the H100): its invocations compute
//! each candidate's logit and exponentials into workgroup memory, then one walks the
//! candidates in the CPU's order so its sums round as the CPU's do. The uniform random number
//! comes from the host (the CPU sampler's own stream) in the last level's per-step
//! parameters: nothing is read back to get it, and the same seed draws the same numbers on
//! either executor.

use crate::device::Caps;
use crate::error::GpuError;
use crate::kernel::KernelFamily;
use crate::op::{Op, grid_1d};
use crate::pipeline::PipelineKey;
use crate::shader::{BindingKind, Program, ShaderFile, shader_file};
use crate::tensor::{GpuTensor, View};

#[cfg(any(test, feature = "parity"))]
mod parity;
#[cfg(any(test, feature = "parity"))]
pub use parity::CHECK;

pub use super::sample_ref::{Drawn, sample_ref};

/// The most candidates top-k may keep on the GPU (`K` in `sampling/topk.wgsl`). llama.cpp's
/// and Ollama's default top-k is 40; larger k (or top-k off) samples on the CPU. Each level
/// keeps this many of a block of [`BLOCK`], so it decides how many levels a vocabulary takes:
/// 64 (16x shorter a level) takes 262,144 and 151,936 logits in three dispatches where 128
/// takes four (docs/PERF.md, D-k-max-64).
pub const K_MAX: usize = 64;
/// Entries one selection workgroup sorts (`B` in `topk.wgsl`): 8 KiB of workgroup memory.
pub const BLOCK: usize = 1024;
/// Written instead of an id when no logit is finite (the CPU sampler's `NoFiniteLogits`).
pub const NO_TOKEN: u32 = u32::MAX;

/// What the draw keeps and how it draws: llama.cpp's top-k -> top-p -> min-p -> temperature
/// -> dist, with the CPU sampler's meaning of every value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sampling {
    /// 1..=[`K_MAX`].
    pub top_k: usize,
    /// >= 1: off.
    pub top_p: f32,
    /// <= 0: off.
    pub min_p: f32,
    /// The fewest tokens top-p and min-p may leave.
    pub min_keep: usize,
    /// <= 0: greedy (the largest logit, ties to the lowest id).
    pub temperature: f32,
}

impl Sampling {
    /// Argmax: the same op, keeping one candidate.
    pub fn greedy() -> Sampling {
        Sampling {
            top_k: 1,
            top_p: 1.0,
            min_p: 0.0,
            min_keep: 0,
            temperature: 0.0,
        }
    }

    /// Whether the op implements these values (NaN parameters have a CPU meaning that
    /// the WGSL need not reproduce: they stay on the CPU).
    pub fn check(&self) -> Result<(), GpuError> {
        let bad = |detail: String| {
            Err(GpuError::InvalidParams {
                op: "sample",
                detail,
            })
        };
        if !(1..=K_MAX).contains(&self.top_k) {
            return bad(format!("top_k {} outside 1..={K_MAX}", self.top_k));
        }
        for (name, v) in [
            ("top_p", self.top_p),
            ("min_p", self.min_p),
            ("temperature", self.temperature),
        ] {
            if !v.is_finite() {
                return bad(format!("{name} {v} is not finite"));
            }
        }
        Ok(())
    }
}

/// Parameters of one selection level (WGSL `Params` in `sampling/topk.wgsl`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct TopKParams {
    /// Entries in the level's input.
    pub n: u32,
    /// Where the input starts: in the logits (level 0) or in the candidate scratch.
    pub src_offset: u32,
    /// Where this level's lists start in the candidate scratch.
    pub dst_offset: u32,
    /// 1: read logits, their positions the ids; 0: read (key, id) pairs of a level before.
    pub from_x: u32,
}

/// Parameters of the draw (the fields after the level's in WGSL `Params` of
/// `sampling/level_draw.wgsl`); rewritten every step ([`SampleParams::set`]) with the step's
/// random number.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct SampleParams {
    /// The element of the output tensor the drawn id goes to.
    pub out_index: u32,
    /// Top-k's k.
    pub k: u32,
    /// The fewest tokens top-p and min-p may leave.
    pub min_keep: u32,
    /// <= 0: greedy.
    pub temperature: f32,
    /// Top-p's cumulative probability; >= 1 is off.
    pub top_p: f32,
    /// Min-p's fraction of the best token's probability; <= 0 is off.
    pub min_p: f32,
    /// `min_p.ln()` in f32, as the CPU computes it: the threshold is then the same sum.
    pub ln_min_p: f32,
    /// The step's uniform number in [0, 1).
    pub u: f32,
}

impl SampleParams {
    /// Sets the sampling values and the step's uniform number `u` in [0, 1).
    pub fn set(&mut self, s: &Sampling, u: f32) -> Result<(), GpuError> {
        s.check()?;
        if !(0.0..1.0).contains(&u) {
            return Err(GpuError::InvalidParams {
                op: "sample",
                detail: format!("uniform number {u} outside [0, 1)"),
            });
        }
        self.k = s.top_k as u32;
        self.min_keep = u32::try_from(s.min_keep).unwrap_or(u32::MAX);
        self.temperature = s.temperature;
        self.top_p = s.top_p;
        self.min_p = s.min_p;
        self.ln_min_p = if s.min_p > 0.0 { s.min_p.ln() } else { 0.0 };
        self.u = u;
        Ok(())
    }
}

/// Parameters of the last selection level, which draws the token (WGSL `Params` in
/// `sampling/level_draw.wgsl`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct TopKDrawParams {
    /// The level's own parameters.
    pub level: TopKParams,
    /// The draw's.
    pub draw: SampleParams,
}

static TOPK: ShaderFile = shader_file!("sampling/topk.wgsl");
static LEVEL: ShaderFile = shader_file!("sampling/level.wgsl");
static LEVEL_DRAW: ShaderFile = shader_file!("sampling/level_draw.wgsl");
static SORT_BARRIER: ShaderFile = shader_file!("sampling/sort_barrier.wgsl");
static SORT_SUBGROUP: ShaderFile = shader_file!("sampling/sort_subgroup.wgsl");
static DRAW: ShaderFile = shader_file!("sampling/draw.wgsl");

const TOPK_BINDINGS: &[BindingKind] = &[
    BindingKind::Uniform,
    BindingKind::StorageRead,
    BindingKind::StorageReadWrite,
];
const TOPK_DRAW_BINDINGS: &[BindingKind] = &[
    BindingKind::Uniform,
    BindingKind::StorageRead,
    BindingKind::StorageReadWrite,
    BindingKind::StorageReadWrite,
];

/// Invocations of a selection workgroup (4 entries each).
pub const WORKGROUP: u32 = 256;

/// Whether the selection sorts through subgroup shuffles on a device with `caps`
/// (`sampling/sort_subgroup.wgsl`): subgroups of one size, at least 4 and dividing the
/// workgroup, so every subgroup is full and holds consecutive entries.
pub(crate) fn sorts_in_subgroups(caps: &Caps) -> bool {
    let size = caps.subgroup_min_size;
    caps.subgroup && size == caps.subgroup_max_size && size >= 4 && WORKGROUP.is_multiple_of(size)
}

/// The sampling kernels: a selection level, or the last level, which then draws.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SampleKernel {
    /// A selection level: the best `K_MAX` of each block of candidates.
    TopK,
    /// The last selection level (one block), which then draws: top-k, top-p, min-p,
    /// temperature, inverse CDF over its best `K_MAX`.
    TopKDraw,
}

impl KernelFamily for SampleKernel {
    fn variants() -> Vec<SampleKernel> {
        vec![SampleKernel::TopK, SampleKernel::TopKDraw]
    }

    fn program(self) -> Program {
        topk_program(false, self == SampleKernel::TopKDraw)
    }

    fn programs(self) -> Vec<Program> {
        let draw = self == SampleKernel::TopKDraw;
        vec![topk_program(false, draw), topk_program(true, draw)]
    }

    fn program_for(self, caps: &Caps) -> Program {
        topk_program(sorts_in_subgroups(caps), self == SampleKernel::TopKDraw)
    }

    fn pipeline_keys(self) -> Vec<PipelineKey> {
        vec![PipelineKey::new(self, WORKGROUP)]
    }

    #[cfg(any(test, feature = "parity"))]
    fn checks() -> Vec<crate::parity::Check> {
        vec![CHECK]
    }
}

/// A selection level's program (`draw`: the last level, which draws the token): its sort
/// through subgroup shuffles, or through workgroup memory only.
fn topk_program(subgroup: bool, draw: bool) -> Program {
    let (sort, sort_name) = match subgroup {
        true => (&SORT_SUBGROUP, "_sg"),
        false => (&SORT_BARRIER, ""),
    };
    let (files, bindings, params_size, name) = match draw {
        false => (
            vec![&TOPK, &LEVEL, sort],
            TOPK_BINDINGS,
            size_of::<TopKParams>(),
            "sample_topk",
        ),
        true => (
            vec![&TOPK, &LEVEL_DRAW, &DRAW, sort],
            TOPK_DRAW_BINDINGS,
            size_of::<TopKDrawParams>(),
            "sample_topk_draw",
        ),
    };
    Program {
        name: format!("{name}{sort_name}"),
        files,
        entry: "main",
        bindings,
        params_size,
    }
}

/// One selection level: `blocks` workgroups over `n_in` entries.
#[derive(Debug, Clone, Copy)]
struct Level {
    n_in: usize,
    src: usize,
    dst: usize,
    from_x: bool,
    blocks: usize,
}

/// Sampling from a row of `n` logits: the selection levels and the draw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    /// Logits in the row: the vocabulary.
    pub n: usize,
}

impl Sample {
    /// Candidate entries of the first level's output (region A of the scratch) and of the
    /// second's (region B); later levels alternate between the two, shrinking.
    fn regions(&self) -> (usize, usize) {
        let a = self.n.div_ceil(BLOCK) * K_MAX;
        let b = if a > K_MAX {
            a.div_ceil(BLOCK) * K_MAX
        } else {
            0
        };
        (a, b)
    }

    /// u32 words of scratch the op needs (a (key, id) pair per candidate).
    pub fn scratch_len(&self) -> usize {
        let (a, b) = self.regions();
        2 * (a + b)
    }

    fn levels(&self, x_offset: usize) -> Vec<Level> {
        let (a, _) = self.regions();
        let mut levels = Vec::new();
        let (mut n_in, mut src, mut dst, mut from_x) = (self.n, x_offset, 0, true);
        loop {
            let blocks = n_in.div_ceil(BLOCK);
            levels.push(Level {
                n_in,
                src,
                dst,
                from_x,
                blocks,
            });
            if blocks == 1 {
                return levels;
            }
            n_in = blocks * K_MAX;
            src = dst;
            dst = if dst == 0 { a } else { 0 };
            from_x = false;
        }
    }

    /// Ops that write the sampled id of `x[x.offset..][..n]` to `out[out.offset]`; the last
    /// op is the draw, whose parameters [`SampleParams::set`] changes per step.
    pub fn ops(
        &self,
        x: View<'_>,
        scratch: &GpuTensor,
        out: View<'_>,
        s: &Sampling,
        u: f32,
    ) -> Result<Vec<Op>, GpuError> {
        if self.n == 0 || self.n >= NO_TOKEN as usize {
            return Err(GpuError::Shape {
                op: "sample",
                detail: format!("a row of {} logits", self.n),
            });
        }
        x.check("sample x", self.n)?;
        out.check("sample out", 1)?;
        View::from(scratch).check("sample scratch", self.scratch_len())?;
        let mut ops = Vec::new();
        let levels = self.levels(x.offset);
        let (last, before) = levels.split_last().expect("at least one level");
        let level_params = |l: &Level| TopKParams {
            n: l.n_in as u32,
            src_offset: l.src as u32,
            dst_offset: l.dst as u32,
            from_x: u32::from(l.from_x),
        };
        for l in before {
            ops.push(Op::new(
                SampleKernel::TopK,
                WORKGROUP,
                &level_params(l),
                &[&x.t.buf, &scratch.buf],
                grid_1d(l.blocks),
            ));
        }
        let mut draw = SampleParams {
            out_index: out.offset as u32,
            k: 1,
            min_keep: 0,
            temperature: 0.0,
            top_p: 1.0,
            min_p: 0.0,
            ln_min_p: 0.0,
            u: 0.0,
        };
        draw.set(s, u)?;
        let params = TopKDrawParams {
            level: level_params(last),
            draw,
        };
        ops.push(Op::new(
            SampleKernel::TopKDraw,
            WORKGROUP,
            &params,
            &[&x.t.buf, &scratch.buf, &out.t.buf],
            grid_1d(last.blocks),
        ));
        Ok(ops)
    }
}
