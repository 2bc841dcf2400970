//! The loss head of training: cross-entropy of each row of logits against its target token,
//! and the loss's gradient written over the logits in place.
//!
//! For a row of raw LM-head outputs `x` (before any final soft-cap), `z = c tanh(x / c)` with
//! `c` the soft-cap (Gemma 2's final logit soft-cap; `z = x` where it is 0), target `t`:
//! `loss = lse(z) - z_t` and `dx_i = w (softmax(z)_i - [i == t]) (1 - tanh^2(x_i / c))` (the
//! last factor 1 without a cap), with `w` the weight of the row's loss in the objective (the
//! reciprocal of the batch's unmasked targets: the gradient of the mean loss comes out
//! directly). A target of [`MASKED`] (any target `>= vocab`) gives a loss of 0 and a zero row.
//!
//! The gradient replaces the logits because a second `[tokens, vocab]` f32 buffer is what the
//! loss head must not cost (262,144 x 4 bytes a token for Gemma 3). WGSL:
//! `loss/cross_entropy_common.wgsl` with `loss/cross_entropy.wgsl` (one f32 a load) or, where
//! every row starts 16-byte aligned (offset and vocabulary multiples of 4, as real models'
//! are), `loss/cross_entropy_vec4.wgsl` (a vec4 a load: a row streamed at the memory's rate);
//! one workgroup of 256 per row, two passes over it (an online softmax's max and sum, then the
//! gradient), no scratch.

use crate::error::GpuError;
use crate::kernel::KernelFamily;
use crate::op::{Op, grid_1d};
use crate::pipeline::PipelineKey;
use crate::shader::{BindingKind, Program, ShaderFile, shader_file};
use crate::tensor::View;

#[cfg(any(test, feature = "parity"))]
mod parity;
#[cfg(any(test, feature = "parity"))]
pub use parity::{CHECK, cross_entropy_loss_ref, cross_entropy_ref};

/// The target that marks a row as masked: no loss, a zero gradient (the kernel and the
/// reference treat every target `>= vocab` so).
pub const MASKED: u32 = u32::MAX;

/// A cross-entropy over `n` rows of `vocab` logits.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CrossEntropy {
    /// Rows (tokens).
    pub n: usize,
    /// Logits a row.
    pub vocab: usize,
    /// The final logit soft-cap `c` (`z = c tanh(x / c)`), or 0 for none.
    pub softcap: f32,
    /// The factor of every row's gradient (`1 / unmasked targets` of the batch for a mean).
    pub weight: f32,
}

/// The kernel's parameters (WGSL `Params` in `loss/cross_entropy.wgsl`). A step built once
/// reuses them; [`CrossEntropyParams::set_weight`] changes the weight between submissions
/// (`Step::params` / `Step::set_params`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct CrossEntropyParams {
    n_rows: u32,
    vocab: u32,
    logits_offset: u32,
    targets_offset: u32,
    loss_offset: u32,
    softcap: f32,
    weight: f32,
    _pad: u32,
}

impl CrossEntropyParams {
    /// Sets the gradient's factor ([`CrossEntropy::weight`]).
    pub fn set_weight(&mut self, weight: f32) {
        self.weight = weight;
    }
}

static COMMON: ShaderFile = shader_file!("loss/cross_entropy_common.wgsl");
static SHADER: ShaderFile = shader_file!("loss/cross_entropy.wgsl");
static VEC4: ShaderFile = shader_file!("loss/cross_entropy_vec4.wgsl");

const BINDINGS: &[BindingKind] = &[
    BindingKind::Uniform,
    BindingKind::StorageReadWrite,
    BindingKind::StorageRead,
    BindingKind::StorageReadWrite,
];

const WORKGROUP: u32 = 256;

/// The cross-entropy kernels (the soft-cap is a uniform branch in both).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CrossEntropyKernel {
    /// One logit a load: any offset and vocabulary.
    Scalar,
    /// Four a load: rows 16-byte aligned.
    Vec4,
}

impl KernelFamily for CrossEntropyKernel {
    fn variants() -> Vec<CrossEntropyKernel> {
        vec![CrossEntropyKernel::Scalar, CrossEntropyKernel::Vec4]
    }

    fn program(self) -> Program {
        let (name, file) = match self {
            CrossEntropyKernel::Scalar => ("cross_entropy", &SHADER),
            CrossEntropyKernel::Vec4 => ("cross_entropy_vec4", &VEC4),
        };
        Program {
            name: name.to_string(),
            files: vec![&COMMON, file],
            entry: "main",
            bindings: BINDINGS,
            params_size: size_of::<CrossEntropyParams>(),
        }
    }

    fn pipeline_keys(self) -> Vec<PipelineKey> {
        vec![PipelineKey::new(self, WORKGROUP)]
    }

    #[cfg(any(test, feature = "parity"))]
    fn checks() -> Vec<crate::parity::Check> {
        vec![CHECK]
    }
}

/// An element index as the kernel's u32, or the error naming what does not fit.
fn index(what: &'static str, v: usize) -> Result<u32, GpuError> {
    u32::try_from(v).map_err(|_| GpuError::InvalidParams {
        op: "cross_entropy",
        detail: format!("{what} {v} does not fit the kernel's 32-bit indices"),
    })
}

impl CrossEntropy {
    /// The op: reads `n * vocab` logits from `logits` and `n` targets from `targets`, writes
    /// `n` losses to `loss` and the gradient over the logits. `loss` must be another tensor
    /// than `logits` and `targets` (wgpu forbids one buffer read and written in a dispatch,
    /// and the logits are both). The soft-cap must be 0 or positive and finite, the weight
    /// finite, `vocab` at least 1, and the last logit's index below 2^32 (a larger batch is
    /// split into ops over fewer rows).
    pub fn op(self, logits: View<'_>, targets: View<'_>, loss: View<'_>) -> Result<Op, GpuError> {
        let invalid = |detail: String| GpuError::InvalidParams {
            op: "cross_entropy",
            detail,
        };
        if self.vocab == 0 {
            return Err(invalid("a vocabulary of 0".into()));
        }
        if !(self.softcap >= 0.0 && self.softcap.is_finite()) {
            return Err(invalid(format!("soft-cap {}", self.softcap)));
        }
        if !self.weight.is_finite() {
            return Err(invalid(format!("weight {}", self.weight)));
        }
        let len = self
            .n
            .checked_mul(self.vocab)
            .ok_or_else(|| invalid(format!("{} rows of {} logits", self.n, self.vocab)))?;
        logits.check("cross_entropy logits", len)?;
        targets.check("cross_entropy targets", self.n)?;
        loss.check("cross_entropy loss", self.n)?;
        index("logits end", logits.offset + len)?;
        index("targets end", targets.offset + self.n)?;
        index("loss end", loss.offset + self.n)?;
        index("vocabulary", self.vocab)?;
        // Every offset and count is at most one of the values just checked.
        let params = CrossEntropyParams {
            n_rows: self.n as u32,
            vocab: self.vocab as u32,
            logits_offset: logits.offset as u32,
            targets_offset: targets.offset as u32,
            loss_offset: loss.offset as u32,
            softcap: self.softcap,
            weight: self.weight,
            _pad: 0,
        };
        let buffers = [&logits.t.buf, &targets.t.buf, &loss.t.buf];
        let kernel = match logits.offset.is_multiple_of(4) && self.vocab.is_multiple_of(4) {
            true => CrossEntropyKernel::Vec4,
            false => CrossEntropyKernel::Scalar,
        };
        Ok(Op::new(
            kernel,
            WORKGROUP,
            &params,
            &buffers,
            grid_1d(self.n),
        ))
    }
}
