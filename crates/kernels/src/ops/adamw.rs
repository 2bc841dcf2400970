//! The optimizer on the GPU: AdamW over one flat f32 parameter buffer (every trained tensor
//! concatenated) with its gradient and moment buffers, after clipping the gradient to a global
//! norm.
//!
//! Two pieces, both reading and writing GPU buffers only, so a training step needs no host
//! round trip between the backward and the update:
//! - [`GradNormSq`]: `sum_i g_i^2` into a small buffer, in two dispatches with a fixed order of
//!   additions (no atomics: the same gradient gives the same bits every run).
//!   WGSL: `optim/norm_sq.wgsl` + `norm/reduce.wgsl`.
//! - [`AdamW::op`]: the update, reading that sum. It follows `torch.optim.AdamW` (torch's
//!   single-tensor path) step for step, with `torch.nn.utils.clip_grad_norm_`'s clip first:
//!   `clip = min(1, max_norm / (sqrt(norm_sq) + 1e-6))` (1 where `max_norm` is 0), `g = grad
//!   clip`, then `w = w (1 - lr wd)` (decoupled weight decay, before the Adam step, on the old
//!   weight), `m = m + (1 - b1)(g - m)`, `v = b2 v + (1 - b2) g^2`, `w = w - lr/bc1 * m /
//!   (sqrt(v)/sqrt(bc2) + eps)` with `bc1 = 1 - b1^t`, `bc2 = 1 - b2^t`: that is `w -= lr
//!   (mhat / (sqrt(vhat) + eps) + wd w)` with `mhat = m / bc1`, `vhat = v / bc2`.
//!   WGSL: `optim/adamw.wgsl`.
//!
//! A step whose squared norm is not finite (NaN or infinite: a gradient that overflowed) is
//! skipped, as torch's `GradScaler` skips `optimizer.step()` on an overflow: the update kernel
//! reads the norm and changes nothing, decided on the device with no read-back, and the
//! caller keeps its step count ([`applies`] is the rule; `adamw_ref`, the parity reference,
//! follows it).

use crate::error::GpuError;
use crate::kernel::KernelFamily;
use crate::op::{Op, grid_1d};
use crate::ops::norm::REDUCE;
use crate::pipeline::PipelineKey;
use crate::shader::{BindingKind, Program, ShaderFile, shader_file};
use crate::tensor::View;

#[cfg(any(test, feature = "parity"))]
mod parity;
#[cfg(any(test, feature = "parity"))]
pub use parity::{CHECK, NONFINITE_CHECK, NORM_CHECK, adamw_ref, grad_norm_sq_ref};

static NORM_SQ: ShaderFile = shader_file!("optim/norm_sq.wgsl");
static UPDATE: ShaderFile = shader_file!("optim/adamw.wgsl");

const NORM_BINDINGS: &[BindingKind] = &[
    BindingKind::Uniform,
    BindingKind::StorageRead,
    BindingKind::StorageReadWrite,
];
const UPDATE_BINDINGS: &[BindingKind] = &[
    BindingKind::Uniform,
    BindingKind::StorageReadWrite,
    BindingKind::StorageRead,
    BindingKind::StorageReadWrite,
    BindingKind::StorageReadWrite,
    BindingKind::StorageRead,
];

const WORKGROUP: u32 = 256;
/// Gradient values one workgroup of the norm's first dispatch squares (`K` in
/// `optim/norm_sq.wgsl` times the workgroup).
const NORM_CHUNK: usize = 16 * WORKGROUP as usize;

/// The optimizer's kernels: the norm's two stages and the update.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AdamWKernel {
    /// One partial sum of squares per workgroup (`optim/norm_sq.wgsl`, `partials`).
    NormSqPartials,
    /// The partial sums added up by one workgroup (`optim/norm_sq.wgsl`, `total`).
    NormSqTotal,
    /// The clipped AdamW update (`optim/adamw.wgsl`).
    Update,
}

impl KernelFamily for AdamWKernel {
    fn variants() -> Vec<AdamWKernel> {
        vec![
            AdamWKernel::NormSqPartials,
            AdamWKernel::NormSqTotal,
            AdamWKernel::Update,
        ]
    }

    fn program(self) -> Program {
        let norm = |name: &str, entry| Program {
            name: name.to_string(),
            files: vec![&NORM_SQ, &REDUCE],
            entry,
            bindings: NORM_BINDINGS,
            params_size: size_of::<NormSqParams>(),
        };
        match self {
            AdamWKernel::NormSqPartials => norm("grad_norm_sq_partials", "partials"),
            AdamWKernel::NormSqTotal => norm("grad_norm_sq_total", "total"),
            AdamWKernel::Update => Program {
                name: "adamw".to_string(),
                files: vec![&UPDATE],
                entry: "main",
                bindings: UPDATE_BINDINGS,
                params_size: size_of::<AdamWParams>(),
            },
        }
    }

    fn pipeline_keys(self) -> Vec<PipelineKey> {
        vec![PipelineKey::new(self, WORKGROUP)]
    }

    #[cfg(any(test, feature = "parity"))]
    fn checks() -> Vec<crate::parity::Check> {
        vec![NORM_CHECK, CHECK, NONFINITE_CHECK]
    }
}

/// An element index as the kernels' u32, or the error naming what does not fit.
fn index(op: &'static str, what: &str, v: usize) -> Result<u32, GpuError> {
    u32::try_from(v).map_err(|_| GpuError::InvalidParams {
        op,
        detail: format!("{what} {v} does not fit the kernel's 32-bit indices"),
    })
}

#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
struct NormSqParams {
    n: u32,
    g_offset: u32,
    out_offset: u32,
    n_partials: u32,
}

/// The squared global norm of a gradient of `n` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GradNormSq {
    /// Gradient values.
    pub n: usize,
}

impl GradNormSq {
    fn partials(self) -> usize {
        self.n.div_ceil(NORM_CHUNK).max(1)
    }

    /// Elements of the buffer [`GradNormSq::ops`] writes: the sum, then one partial sum per
    /// 4,096 gradient values.
    pub fn scratch_len(self) -> usize {
        1 + self.partials()
    }

    /// The two dispatches that write `sum_i grad_i^2` (over `n` values of `grad`) to element
    /// 0 of `scratch` ([`GradNormSq::scratch_len`] elements, another tensor than `grad`); the
    /// rest of `scratch` holds the partial sums. A zero-length gradient gives 0.
    pub fn ops(self, grad: View<'_>, scratch: View<'_>) -> Result<[Op; 2], GpuError> {
        const OP: &str = "grad_norm_sq";
        grad.check("grad_norm_sq grad", self.n)?;
        scratch.check("grad_norm_sq scratch", self.scratch_len())?;
        index(OP, "gradient end", grad.offset + self.n)?;
        index(OP, "scratch end", scratch.offset + self.scratch_len())?;
        let params = NormSqParams {
            n: self.n as u32,
            g_offset: grad.offset as u32,
            out_offset: scratch.offset as u32,
            n_partials: self.partials() as u32,
        };
        let buffers = [&grad.t.buf, &scratch.t.buf];
        Ok([
            Op::new(
                AdamWKernel::NormSqPartials,
                WORKGROUP,
                &params,
                &buffers,
                grid_1d(self.partials()),
            ),
            Op::new(
                AdamWKernel::NormSqTotal,
                WORKGROUP,
                &params,
                &buffers,
                [1, 1, 1],
            ),
        ])
    }
}

/// Whether a step whose gradient has squared global norm `norm_sq` is applied: only where the
/// norm is finite. Otherwise the update changes nothing (parameters and moments keep their
/// bits) and the step must not count: the bias corrections' `t` stays where it was.
pub fn applies(norm_sq: f64) -> bool {
    norm_sq.is_finite()
}

/// AdamW's hyper-parameters for one step (torch's names and defaults' meaning). `lr` and
/// `step` change from step to step: [`AdamWParams::set`] rewrites a built step's copy.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AdamW {
    /// Learning rate of this step (after any schedule).
    pub lr: f64,
    /// The first moment's decay (torch's `betas[0]`).
    pub beta1: f64,
    /// The second moment's decay (torch's `betas[1]`).
    pub beta2: f64,
    /// Added to the bias-corrected `sqrt(v)`.
    pub eps: f64,
    /// Decoupled weight decay: `w *= 1 - lr weight_decay` before the Adam step.
    pub weight_decay: f64,
    /// Clip the gradient to this global norm; 0 for no clipping.
    pub max_norm: f64,
    /// The step number t, from 1 (torch's `state["step"]` after its increment).
    pub step: u32,
}

impl AdamW {
    /// Checks what the formulas need: step >= 1, betas in [0, 1), lr, eps, weight decay and
    /// max_norm finite and not negative.
    pub fn check(&self) -> Result<(), GpuError> {
        let invalid = |detail: String| {
            Err(GpuError::InvalidParams {
                op: "adamw",
                detail,
            })
        };
        if self.step == 0 {
            return invalid(
                "step 0: steps count from 1 (the bias corrections divide by 1 - beta^t)".into(),
            );
        }
        for (name, b) in [("beta1", self.beta1), ("beta2", self.beta2)] {
            if !(0.0..1.0).contains(&b) {
                return invalid(format!("{name} {b} outside [0, 1)"));
            }
        }
        for (name, x) in [
            ("lr", self.lr),
            ("eps", self.eps),
            ("weight_decay", self.weight_decay),
            ("max_norm", self.max_norm),
        ] {
            if !(x >= 0.0 && x.is_finite()) {
                return invalid(format!("{name} {x}: must be finite and not negative"));
            }
        }
        Ok(())
    }

    /// The bias corrections `(1 - beta1^t, 1 - beta2^t)`, t = [`AdamW::step`].
    pub fn bias_corrections(&self) -> (f64, f64) {
        let t = i32::try_from(self.step).unwrap_or(i32::MAX);
        (1.0 - self.beta1.powi(t), 1.0 - self.beta2.powi(t))
    }

    /// The factor the gradient is multiplied by, from its squared global norm:
    /// `min(1, max_norm / (sqrt(norm_sq) + 1e-6))`, or 1 where `max_norm` is 0 (as
    /// `torch.nn.utils.clip_grad_norm_`).
    pub fn clip(&self, norm_sq: f64) -> f64 {
        if self.max_norm > 0.0 {
            (self.max_norm / (norm_sq.sqrt() + 1e-6)).min(1.0)
        } else {
            1.0
        }
    }

    /// The update of `n` parameters `w` with gradient `grad` and moments `m`, `v` (all f32,
    /// updated in place but `grad`), clipped by the squared norm at element 0 of `norm_sq`
    /// ([`GradNormSq::ops`]'s scratch); a norm that is not finite leaves `w`, `m` and `v` as
    /// they were ([`applies`]). `w`, `m` and `v` must
    /// be three tensors and none of them `grad`'s or `norm_sq`'s (wgpu forbids one buffer read
    /// and written in a dispatch).
    pub fn op(
        &self,
        n: usize,
        w: View<'_>,
        grad: View<'_>,
        m: View<'_>,
        v: View<'_>,
        norm_sq: View<'_>,
    ) -> Result<Op, GpuError> {
        const OP: &str = "adamw";
        w.check("adamw w", n)?;
        grad.check("adamw grad", n)?;
        m.check("adamw m", n)?;
        v.check("adamw v", n)?;
        norm_sq.check("adamw norm_sq", 1)?;
        for (what, view, len) in [
            ("w end", w, n),
            ("grad end", grad, n),
            ("m end", m, n),
            ("v end", v, n),
            ("norm_sq offset", norm_sq, 1),
        ] {
            index(OP, what, view.offset + len)?;
        }
        let mut params = AdamWParams {
            n: n as u32,
            w_offset: w.offset as u32,
            g_offset: grad.offset as u32,
            m_offset: m.offset as u32,
            v_offset: v.offset as u32,
            norm_offset: norm_sq.offset as u32,
            ..bytemuck::Zeroable::zeroed()
        };
        params.set(self)?;
        let buffers = [&w.t.buf, &grad.t.buf, &m.t.buf, &v.t.buf, &norm_sq.t.buf];
        Ok(Op::new(
            AdamWKernel::Update,
            WORKGROUP,
            &params,
            &buffers,
            grid_1d(n.div_ceil(WORKGROUP as usize)),
        ))
    }
}

/// The update kernel's parameters (WGSL `Params` in `optim/adamw.wgsl`): the per-step factors
/// rounded once to f32 from their f64 values.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct AdamWParams {
    n: u32,
    w_offset: u32,
    g_offset: u32,
    m_offset: u32,
    v_offset: u32,
    norm_offset: u32,
    max_norm: f32,
    decay: f32,
    one_minus_b1: f32,
    beta2: f32,
    one_minus_b2: f32,
    step_size: f32,
    bc2_sqrt: f32,
    eps: f32,
    _pad: [u32; 2],
}

impl AdamWParams {
    /// Sets the hyper-parameters to `p`'s (a built step's update op, between submissions:
    /// `Step::params`, this, `Step::set_params`). Fails as [`AdamW::check`].
    pub fn set(&mut self, p: &AdamW) -> Result<(), GpuError> {
        p.check()?;
        let (bc1, bc2) = p.bias_corrections();
        self.max_norm = p.max_norm as f32;
        self.decay = (1.0 - p.lr * p.weight_decay) as f32;
        self.one_minus_b1 = (1.0 - p.beta1) as f32;
        self.beta2 = p.beta2 as f32;
        self.one_minus_b2 = (1.0 - p.beta2) as f32;
        self.step_size = (p.lr / bc1) as f32;
        self.bc2_sqrt = bc2.sqrt() as f32;
        self.eps = p.eps as f32;
        Ok(())
    }
}
