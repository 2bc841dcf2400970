//! Residual add with its norms in one dispatch: `h += [rms_norm(a) * w_in]`, then optionally
//! `y = rms_norm(h) * w_out`.
//!
//! Gemma's post-attention block is `h += norm(attn_out) * w_post; y = norm(h) * w_ffn_norm`
//! (three dispatches before: norm, add, norm); Llama's is `h += attn_out; y = norm(h) * w`.
//!
//! WGSL: `norm/residual_norm.wgsl` (entry `main`: h only; `main_out`: h and y; the `PRE`
//! override turns the norm of `a` on) + `norm/reduce.wgsl` + the q8 hook `norm/q8_none.wgsl`
//! (or `norm/q8_out.wgsl`: y's q8 copy too, [`crate::ops::residual_norm_q8`]). One workgroup
//! of 256 per row, up to 16 values per invocation held in registers between the passes, as
//! many as the width needs ([`groups`]: a decode step's norm is bound by its latency, so each
//! invocation issues only the loads the row has, all at once).

use crate::error::GpuError;
use crate::kernel::KernelFamily;
use crate::op::{Op, grid_1d};
use crate::ops::norm::REDUCE;
use crate::ops::{quantize, residual_norm_q8};
use crate::pipeline::PipelineKey;
use crate::shader::{BindingKind, Program, ShaderFile, shader_file};
use crate::tensor::{GpuTensor, View};

#[cfg(any(test, feature = "parity"))]
mod parity;
#[cfg(any(test, feature = "parity"))]
pub use parity::CHECK;

#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub(crate) struct ResidualNormParams {
    pub n: u32,
    pub n_rows: u32,
    pub a_offset: u32,
    pub h_offset: u32,
    pub y_offset: u32,
    pub eps: f32,
    /// Word index of y's q8 copy (`ResidualOut::NormQ8` only; 0 otherwise).
    pub q_offset: u32,
    pub _pad: u32,
}

static SHADER: ShaderFile = shader_file!("norm/residual_norm.wgsl");
/// The q8 hook that stores nothing.
static Q8_NONE: ShaderFile = shader_file!("norm/q8_none.wgsl");

/// params, a, h (read-write), w_in.
const BINDINGS: &[BindingKind] = &[
    BindingKind::Uniform,
    BindingKind::StorageRead,
    BindingKind::StorageReadWrite,
    BindingKind::StorageRead,
];
/// ... then y (read-write) and w_out.
const BINDINGS_OUT: &[BindingKind] = &[
    BindingKind::Uniform,
    BindingKind::StorageRead,
    BindingKind::StorageReadWrite,
    BindingKind::StorageRead,
    BindingKind::StorageReadWrite,
    BindingKind::StorageRead,
];

pub(crate) const WORKGROUP: u32 = 256;

/// The most groups of `4 * WORKGROUP` elements a tile holds (16 values per invocation).
pub const MAX_GROUPS: u8 = 4;

/// The kernel's tile for rows of `n`, in groups of `4 * WORKGROUP` elements: the whole row
/// where it fits in [`MAX_GROUPS`] (every model here: n <= 4096), else the largest tile.
pub fn groups(n: usize) -> u8 {
    let group = 4 * WORKGROUP as usize;
    n.div_ceil(group).clamp(1, usize::from(MAX_GROUPS)) as u8
}

/// What the kernel writes besides the updated h.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ResidualOut {
    /// Nothing: h only.
    H,
    /// `y = rms_norm(h) * w_out` (f32).
    Norm,
    /// y and its q8 copy (the decode matvec's q8 input; one row).
    NormQ8,
}

impl ResidualOut {
    /// Every output set.
    pub const ALL: [ResidualOut; 3] = [ResidualOut::H, ResidualOut::Norm, ResidualOut::NormQ8];
}

/// The residual kernel: with the addend's norm (`PRE`), what it writes besides h, and its
/// tile (`GROUPS`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ResidualNormKernel {
    /// `PRE`: the addend through its own weighted RMSNorm before the add.
    pub pre_norm: bool,
    /// What it writes besides h.
    pub out: ResidualOut,
    /// The tile in groups of `4 * 256` elements (1 to [`MAX_GROUPS`]; see [`groups`]).
    pub groups: u8,
}

impl KernelFamily for ResidualNormKernel {
    fn variants() -> Vec<ResidualNormKernel> {
        let mut all = Vec::new();
        for pre_norm in [false, true] {
            for out in ResidualOut::ALL {
                for groups in 1..=MAX_GROUPS {
                    all.push(ResidualNormKernel {
                        pre_norm,
                        out,
                        groups,
                    });
                }
            }
        }
        all
    }

    fn program(self) -> Program {
        let ResidualNormKernel { pre_norm, out, .. } = self;
        let name = match (pre_norm, out) {
            (false, ResidualOut::H) => "residual",
            (true, ResidualOut::H) => "norm_residual",
            (false, ResidualOut::Norm) => "residual_norm",
            (true, ResidualOut::Norm) => "norm_residual_norm",
            (false, ResidualOut::NormQ8) => "residual_norm_q8",
            (true, ResidualOut::NormQ8) => "norm_residual_norm_q8",
        };
        let (files, entry, bindings) = match out {
            ResidualOut::H => (vec![&SHADER, &REDUCE, &Q8_NONE], "main", BINDINGS),
            ResidualOut::Norm => (vec![&SHADER, &REDUCE, &Q8_NONE], "main_out", BINDINGS_OUT),
            ResidualOut::NormQ8 => (
                vec![&SHADER, &REDUCE, &residual_norm_q8::HOOK, &quantize::RULE],
                "main_out",
                residual_norm_q8::BINDINGS,
            ),
        };
        Program {
            name: name.to_string(),
            files,
            entry,
            bindings,
            params_size: size_of::<ResidualNormParams>(),
        }
    }

    fn constants(self) -> Vec<(&'static str, f64)> {
        vec![
            ("PRE", f64::from(u8::from(self.pre_norm))),
            ("GROUPS", f64::from(self.groups)),
        ]
    }

    fn pipeline_keys(self) -> Vec<PipelineKey> {
        vec![PipelineKey::new(self, WORKGROUP)]
    }

    #[cfg(any(test, feature = "parity"))]
    fn checks() -> Vec<crate::parity::Check> {
        vec![CHECK, residual_norm_q8::CHECK]
    }
}

/// The norm after the add: `y = rms_norm(h) * weight`, written to `y` (not h's buffer).
#[derive(Debug, Clone, Copy)]
pub struct NormOut<'a> {
    /// Where the normed rows go.
    pub y: View<'a>,
    /// The norm's gain.
    pub weight: &'a GpuTensor,
}

/// Shape: `n_rows` rows of `n` (one row per token), one `eps` for both norms.
#[derive(Debug, Clone, Copy)]
pub struct ResidualNorm {
    /// Values per row.
    pub n: usize,
    /// Rows.
    pub n_rows: usize,
    /// Added to the mean square.
    pub eps: f32,
}

impl ResidualNorm {
    /// `h += rms_norm(a) * w_in` (`w_in` given) or `h += a`, row by row, in place in `h`;
    /// then, with `out`, `out.y = rms_norm(h) * out.weight`. `a`, `h` and `out.y` must be
    /// different buffers.
    pub fn op(
        self,
        a: View<'_>,
        w_in: Option<&GpuTensor>,
        h: View<'_>,
        out: Option<NormOut<'_>>,
    ) -> Result<Op, GpuError> {
        self.build(a, w_in, h, out, None)
    }

    /// The op of [`ResidualNorm::op`], with `q` (`ResidualOut::NormQ8`, `out` given: the
    /// caller has checked it) y's q8 copy too.
    pub(crate) fn build(
        self,
        a: View<'_>,
        w_in: Option<&GpuTensor>,
        h: View<'_>,
        out: Option<NormOut<'_>>,
        q: Option<View<'_>>,
    ) -> Result<Op, GpuError> {
        let len = self.n * self.n_rows;
        a.check("residual_norm a", len)?;
        h.check("residual_norm h", len)?;
        if let Some(w) = w_in {
            View::from(w).check("residual_norm w_in", self.n)?;
        }
        let mut ids = vec![a.t.buf.id, h.t.buf.id];
        if let Some(o) = out {
            o.y.check("residual_norm y", len)?;
            View::from(o.weight).check("residual_norm w_out", self.n)?;
            ids.push(o.y.t.buf.id);
        }
        ids.extend(q.map(|q| q.t.buf.id));
        if has_dup(&ids) {
            return Err(GpuError::Shape {
                op: "residual_norm",
                detail: "a, h, y and q must be different buffers".into(),
            });
        }
        let params = ResidualNormParams {
            n: self.n as u32,
            n_rows: self.n_rows as u32,
            a_offset: a.offset as u32,
            h_offset: h.offset as u32,
            y_offset: out.map_or(0, |o| o.y.offset as u32),
            eps: self.eps,
            q_offset: q.map_or(0, |q| q.offset as u32),
            _pad: 0,
        };
        let kernel = ResidualNormKernel {
            pre_norm: w_in.is_some(),
            out: match (out, q) {
                (None, _) => ResidualOut::H,
                (Some(_), None) => ResidualOut::Norm,
                (Some(_), Some(_)) => ResidualOut::NormQ8,
            },
            groups: groups(self.n),
        };
        // An unused weight slot binds `a` (read-only, never read by that variant).
        let mut buffers = vec![&a.t.buf, &h.t.buf, w_in.map_or(&a.t.buf, |w| &w.buf)];
        if let Some(o) = &out {
            buffers.extend([&o.y.t.buf, &o.weight.buf]);
        }
        buffers.extend(q.map(|q| &q.t.buf));
        Ok(Op::new(
            kernel,
            WORKGROUP,
            &params,
            &buffers,
            grid_1d(self.n_rows),
        ))
    }
}

pub(crate) fn has_dup(ids: &[crate::tensor::BufferId]) -> bool {
    ids.iter()
        .enumerate()
        .any(|(i, id)| ids[i + 1..].contains(id))
}
