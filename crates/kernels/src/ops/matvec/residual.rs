//! The residual epilogue of the decode matvec and the scaled input that reads what it stores:
//! a Llama-style residual op `h' = h + a; y = rms_norm(h') * w_out` with no dispatch of its
//! own, where `a = W x` is an o or down projection.
//!
//! [`matvec_residual`] (store file `matvec/out_residual.wgsl`): the product adds each row to
//! h in place, stores `z = h' * w_out` (y before its one scale) and, per workgroup, the sum of
//! its rows' `h'^2` ([`residual_partials`] of them). Every row belongs to one workgroup, so
//! no workgroup waits for another. The products that read y take [`Input::Scaled`]
//! (`matvec/x_scaled.wgsl`): they load the partial sums before their loop, add them up after
//! it (every subgroup by itself, or without subgroup operations the workgroup) and scale
//! their row totals by `1 / rms(h')`, as the norm input ([`Input::Norm`]) scales by the rms
//! it gathers. Against the norm input, a reader's
//! workgroup reads the partial sums (a quarter of n floats or fewer) instead of `a`, `h` and
//! the gain (3 n floats), so the residual op can go where its reader is too big for the norm
//! input. The weight must be one chunk (one dispatch, one set of partial sums).

use crate::error::GpuError;
use crate::op::Op;
use crate::ops::epilogue::Epilogue;
use crate::ops::residual_norm::has_dup;
use crate::ops::split::SplitParams;
use crate::tensor::{GpuTensor, GpuWeight, View};

use super::{Input, InputKind, MatvecKernel, NormParams, Outputs, Place, ROWS, invalid, lanes};

/// Where a residual epilogue puts the op's results: h (updated in place), z (`h' * w_out`,
/// n floats) and the partial sums ([`residual_partials`] floats). z and the partial sums
/// may share a tensor; h is another, and neither is the product's input.
#[derive(Debug, Clone, Copy)]
pub struct ResidualRows<'a> {
    /// The residual stream, updated in place.
    pub h: View<'a>,
    /// The gain of the norm after the add.
    pub w_out: &'a GpuTensor,
    /// Where `h' * w_out` goes.
    pub z: View<'a>,
    /// Where the partial sums of `h'^2` go.
    pub partials: View<'a>,
}

/// How many partial sums [`matvec_residual`] over `w` stores: one per workgroup of its one
/// dispatch.
pub fn residual_partials(w: &GpuWeight) -> usize {
    let s = w.shape;
    let quads = lanes(s.format, InputKind::Plain, s.n_in, s.n_out).quads as usize;
    s.n_out.div_ceil(ROWS * quads)
}

/// `a = W x`, then for every row `h[r] += a[r]`, `z[r] = h[r] * w_out[r]`, and the partial
/// sums of `h^2` ([`ResidualRows`]); one dispatch, `x` a vector of the weight's `n_in`
/// inputs. `W` must be one weight chunk.
pub fn matvec_residual(w: &GpuWeight, x: View<'_>, r: ResidualRows<'_>) -> Result<Op, GpuError> {
    const OP: &str = "matvec_residual";
    let s = w.shape;
    let [chunk] = w.chunks.as_slice() else {
        return Err(invalid(
            OP,
            format!(
                "{} weight chunks: the partial sums need one dispatch",
                w.chunks.len()
            ),
        ));
    };
    let n = s.n_out;
    r.h.check("matvec_residual h", n)?;
    r.z.check("matvec_residual z", n)?;
    r.partials
        .check("matvec_residual partials", residual_partials(w))?;
    View::from(r.w_out).check("matvec_residual w_out", n)?;
    if has_dup(&[x.t.buf.id, r.h.t.buf.id, r.z.t.buf.id])
        || [x.t.buf.id, r.h.t.buf.id].contains(&r.partials.t.buf.id)
    {
        return Err(invalid(
            OP,
            "x, h and z (with the partial sums) must be different buffers".into(),
        ));
    }
    let bound = Input::Plain(x).bind(s, Epilogue::STORE)?;
    let bound = super::Bound {
        kernel: MatvecKernel::Residual(s.format),
        more: vec![&r.h.t.buf, &r.w_out.buf, &r.partials.t.buf],
        norm: NormParams {
            h_offset: r.h.offset as u32,
            h_out_offset: 0,
            x_out_offset: r.partials.offset as u32,
            eps: 0.0,
        },
        ..bound
    };
    let place = Place {
        n_rows: n,
        y_offset: r.z.offset as u32,
        bias_offset: 0,
        split: SplitParams::default(),
    };
    let to = Outputs {
        y: &r.z.t.buf,
        bias: None,
    };
    Ok(bound.op(s, &chunk.buf, &to, place))
}
