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

use crate::device::Gpu;
use crate::error::GpuError;
use crate::kernel::KernelFamily;
use crate::op::{Op, grid_1d};
use crate::ops::norm::{REDUCE, RmsNorm};
use crate::ops::{quantize, residual_norm_q8};
use crate::parity::data::{Rng, random_f32};
use crate::parity::{Check, Compare, U};
use crate::readback::Readback;
use crate::shader::{BindingKind, Program, ShaderFile, shader_file};
use crate::step::StepBuilder;
use crate::tensor::{Dtype, GpuTensor, View};

#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct ResidualNormParams {
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

pub const WORKGROUP: u32 = 256;

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

    #[cfg(any(test, feature = "parity"))]
    fn checks() -> Vec<Check> {
        vec![CHECK, residual_norm_q8::CHECK]
    }
}

/// The norm after the add: `y = rms_norm(h) * weight`, written to `y` (not h's buffer).
#[derive(Debug, Clone, Copy)]
pub struct NormOut<'a> {
    pub y: View<'a>,
    pub weight: &'a GpuTensor,
}

/// Shape: `n_rows` rows of `n` (one row per token), one `eps` for both norms.
#[derive(Debug, Clone, Copy)]
pub struct ResidualNorm {
    pub n: usize,
    pub n_rows: usize,
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

    /// CPU reference in f64: updates `h` (each element rounded once to f32) and returns `y`
    /// when `w_out` is given (the f64 norm of the rounded h).
    pub fn reference(
        self,
        a: &[f32],
        w_in: Option<&[f32]>,
        h: &mut [f32],
        w_out: Option<&[f32]>,
    ) -> Option<Vec<f32>> {
        let n = self.n;
        for (ar, hr) in a.chunks_exact(n).zip(h.chunks_exact_mut(n)) {
            let added = self.pre(ar, w_in);
            for (hv, d) in hr.iter_mut().zip(added) {
                *hv = (f64::from(*hv) + d) as f32;
            }
        }
        let norm = RmsNorm {
            n,
            n_rows: self.n_rows,
            eps: self.eps,
        };
        w_out.map(|w| norm.reference(&h[..n * self.n_rows], Some(w)))
    }

    /// One row of `a'` in f64: `a / rms(a) * w_in`, or `a`.
    pub(crate) fn pre(self, a: &[f32], w_in: Option<&[f32]>) -> Vec<f64> {
        let Some(w) = w_in else {
            return a.iter().map(|&v| f64::from(v)).collect();
        };
        let ss: f64 = a.iter().map(|&v| f64::from(v) * f64::from(v)).sum();
        let r = 1.0 / (ss / a.len() as f64 + f64::from(self.eps)).sqrt();
        a.iter()
            .zip(w)
            .map(|(&v, &g)| f64::from(v) * r * f64::from(g))
            .collect()
    }
}

pub(crate) fn has_dup(ids: &[crate::tensor::BufferId]) -> bool {
    ids.iter()
        .enumerate()
        .any(|(i, id)| ids[i + 1..].contains(id))
}

/// Tolerance. h with the pre-norm: `(n/2 + 8) u |a'| + 2 u |h_new|`: a' = a / rms(a) * w_in
/// carries rms_norm's bound (the sum of n squares errs <= n u relative, halved by the square
/// root; division, sqrt, eps and the products a few u), and the add rounds once on the GPU
/// and once in the reference. h without it: exact (one correctly rounded f32 add on both
/// sides). y: rms_norm's bound `(n/2 + 8) u |y|` against the f64 norm of the h the GPU wrote
/// (so h's rounding is not counted twice).
pub const CHECK: Check = Check {
    name: "residual_norm",
    tolerance: "h: (n/2+8)u|a'|+2u|h| (or exact); y: (n/2+8)u|y|",
    case: parity_case,
};

/// One random shape: `(n, n_rows, pre_norm, out_norm)`.
type Shape = (usize, usize, bool, bool);

fn parity_case(gpu: &Gpu, rng: &mut Rng) -> Result<Compare, GpuError> {
    let n = match rng.range(0, 3) {
        0 => rng.pick(&[1, 64, 576, 640, 1152, 2048, 4096, 4097, 8192]),
        1 => rng.range(1, 1000),
        _ => rng.range(1000, 9000),
    };
    let shape = (n, rng.range(1, 5), rng.bool(), rng.bool());
    compare(gpu, shape, rng.next_u64())
}

fn compare(gpu: &Gpu, shape: Shape, seed: u64) -> Result<Compare, GpuError> {
    let (n, n_rows, pre_norm, out_norm) = shape;
    let op = ResidualNorm {
        n,
        n_rows,
        eps: 1e-6,
    };
    let len = n * n_rows;
    // a at a different scale than h, as attention output against the residual stream.
    let a: Vec<f32> = random_f32(len, seed).iter().map(|v| v * 3.0).collect();
    let h = random_f32(len, seed ^ 1);
    let w_in = random_f32(n, seed ^ 2);
    let w_out = random_f32(n, seed ^ 3);
    // Offsets: a at 3, h at 1, y at 2 (odd, so nothing relies on alignment).
    let at = GpuTensor::from_f32(gpu, &[len + 3], &[&[7.0; 3], &a[..]].concat());
    let ht = GpuTensor::from_f32(gpu, &[len + 1], &[&[5.0], &h[..]].concat());
    let yt = GpuTensor::zeros(gpu, &[len + 2], Dtype::F32);
    let wit = GpuTensor::from_f32(gpu, &[n], &w_in);
    let wot = GpuTensor::from_f32(gpu, &[n], &w_out);
    let out = out_norm.then_some(NormOut {
        y: View::at(&yt, 2),
        weight: &wot,
    });
    let built = op.op(
        View::at(&at, 3),
        pre_norm.then_some(&wit),
        View::at(&ht, 1),
        out,
    )?;
    let mut b = StepBuilder::new();
    b.push(built);
    let mut step = b.build(gpu);
    let rb = Readback::new(gpu, (len * 4) as u64);
    let mut h_gpu = vec![0f32; len];
    rb.run_and_read(gpu, &mut step, &ht, 1, &mut h_gpu)?;
    let mut y_gpu = vec![0f32; len];
    if out_norm {
        rb.read(gpu, &yt, 2, &mut y_gpu)?;
    }

    let mut c = Compare::default();
    let at_ = |what: &'static str, i: usize| {
        move || format!("n {n} rows {n_rows} pre {pre_norm} out {out_norm} {what} {i}")
    };
    let mut h_ref = h.clone();
    op.reference(&a, pre_norm.then_some(&w_in), &mut h_ref, None);
    let ulps = (n / 2 + 8) as f64;
    for (i, (&g, &r)) in h_gpu.iter().zip(&h_ref).enumerate() {
        let (g, r) = (f64::from(g), f64::from(r));
        if pre_norm {
            let row = &a[i / n * n..][..n];
            let ap = op.pre(row, Some(&w_in))[i % n].abs();
            c.add(g, r, ulps * U * ap + 2.0 * U * r.abs() + 1e-30, at_("h", i));
        } else {
            c.exact(g, r, at_("h", i));
        }
    }
    if out_norm {
        let norm = RmsNorm {
            n,
            n_rows,
            eps: op.eps,
        };
        let y_ref = norm.reference(&h_gpu, Some(&w_out));
        for (i, (&g, &r)) in y_gpu.iter().zip(&y_ref).enumerate() {
            let bound = ulps * U * f64::from(r.abs()) + 1e-30;
            c.add(f64::from(g), f64::from(r), bound, at_("y", i));
        }
    }
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil;

    #[test]
    fn residual_norm_matches_reference() {
        testutil::parity("residual_norm", 8, 23);
    }

    /// Every variant at gemma's width (640), smollm2's (576), a tile of each group count
    /// (1500: 2 groups; 2560, gemma3-4b: 3; 4096: 4), and past one tile (8192, 4097: the
    /// re-reading path), with several rows.
    #[test]
    fn variants_and_tiles() {
        let Some(gpu) = testutil::gpu() else { return };
        for n in [576, 640, 1500, 2560, 4096, 4097, 8192] {
            for (pre, out) in [(false, false), (true, false), (false, true), (true, true)] {
                let c = compare(gpu, (n, 3, pre, out), n as u64).unwrap();
                assert!(c.max_ratio <= 1.0, "{}", c.worst);
            }
        }
    }

    #[test]
    fn rejects_aliased_buffers() {
        let Some(gpu) = testutil::gpu() else { return };
        let t = GpuTensor::zeros(gpu, &[128], Dtype::F32);
        let op = ResidualNorm {
            n: 64,
            n_rows: 1,
            eps: 1e-6,
        };
        assert!(op.op(View::at(&t, 64), None, View::from(&t), None).is_err());
    }
}
