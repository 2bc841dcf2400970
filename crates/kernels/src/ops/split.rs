//! Split outputs of the weight kernels: one matvec (decode) or tiled matmul (prefill) over a
//! row range of a weight, its rows going to up to [`MAX_OUTPUTS`] outputs in turn. The
//! projections that read the same input (q, k and v; gate and up) are uploaded as one
//! stacked matrix, and [`crate::ops::matvec::matvec_split`] /
//! [`crate::ops::matmul::Matmul::split_ops`] compute them in one dispatch per weight chunk
//! instead of one per projection (a decode step of a small model is bound by its number of
//! dispatches); with one output they compute a single projection of a stacked weight.
//!
//! The outputs are regions of one tensor, each with its own offset and token stride: the
//! rows of output j land at `y.offset + t * stride + (r - first row of j)`. They share the y
//! binding, so the split variant binds exactly what the one-output variant binds (the bias,
//! if any, at 5), and the caller (the model's lowering) places the outputs in one activation
//! buffer. The bias, if any, is indexed by the row within the range
//! (`bias[bias.offset + r - first]`): a stacked bias beside a stacked weight.
//!
//! A weight larger than one binding is split into row chunks; each chunk the range touches
//! is one dispatch over its rows in the range (`row_base`: where they start in the chunk),
//! and a chunk's rows may straddle the outputs' boundaries: the kernel places every row
//! (`common/out_split.wgsl`). Each output row is computed exactly as the one-output kernel
//! computes it (same workgroup, same order of sums), so a split product equals the
//! separate products bit for bit (`tests::split_equals_separate_products`). The tensor-core
//! matmul stores a 64 x 64 tile straight from its accumulators when the tile's rows lie in
//! one output (aligned), else element by element (`y_tile` of the place file).

use crate::error::GpuError;
use crate::tensor::{View, WeightChunk, WeightRows};

#[cfg(any(test, feature = "parity"))]
mod parity;
#[cfg(any(test, feature = "parity"))]
pub(crate) use parity::{Case, Kind, compare};
#[cfg(any(test, feature = "parity"))]
pub use parity::{MATMUL_CHECK, MATMUL_COOP_CHECK, MATVEC_CHECK};

/// The most outputs one split product has (q, k and v).
pub const MAX_OUTPUTS: usize = 3;

/// The split part of the weight kernels' parameters (the trailing fields of `Params` in
/// `matvec/matvec.wgsl` and `matmul/matmul.wgsl`; zero in the one-output variant): dispatch
/// row r reads chunk row `row_base + r` and goes to output
/// `j = (r >= split_end[0]) + (r >= split_end[1])`, element `y_offsets[j] + t * y_strides[j] + r`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct SplitParams {
    /// The chunk row dispatch row 0 reads.
    pub row_base: u32,
    /// The dispatch row where outputs 0 and 1 end (`n_rows` for outputs the range lacks).
    pub split_end: [u32; 2],
    /// WGSL alignment of the arrays after it.
    pub _pad: u32,
    /// Each output's offset minus the dispatch row its first row would be (mod 2^32).
    pub y_offsets: [u32; 4],
    /// Each output's token stride (the matmul's; unused by the matvec).
    pub y_strides: [u32; 4],
}

/// One output of a split product: the next `rows` rows of the range, token t's row at
/// `y.offset + t * stride` (the matvec has one token; its stride is unused).
#[derive(Debug, Clone, Copy)]
pub struct Out<'a> {
    /// Where its first row goes.
    pub y: View<'a>,
    /// Rows it takes.
    pub rows: usize,
    /// Elements from one token's row to the next's.
    pub stride: usize,
}

impl<'a> Out<'a> {
    /// Token rows packed: stride `rows`.
    pub fn new(y: View<'a>, rows: usize) -> Out<'a> {
        Out {
            y,
            rows,
            stride: rows,
        }
    }
}

/// One dispatch of a split product: the rows of `chunk` in the range.
#[derive(Debug)]
pub(crate) struct Part<'a> {
    pub chunk: &'a WeightChunk,
    pub n_rows: usize,
    pub bias_offset: u32,
    pub split: SplitParams,
}

fn invalid(op: &'static str, detail: String) -> GpuError {
    GpuError::InvalidParams { op, detail }
}

/// The dispatches of a split product over rows `w` into `outs` for `n_tokens` tokens (1 for
/// the matvec), after checking that the outputs take the range's rows exactly, lie in one
/// tensor and fit it, and that the bias (if any) covers the range.
pub(crate) fn parts<'a>(
    op: &'static str,
    w: WeightRows<'a>,
    bias: Option<View<'_>>,
    outs: &[Out<'_>],
    n_tokens: usize,
) -> Result<Vec<Part<'a>>, GpuError> {
    w.check(op)?;
    if outs.is_empty() || outs.len() > MAX_OUTPUTS {
        return Err(invalid(
            op,
            format!("{} outputs (1 to {MAX_OUTPUTS})", outs.len()),
        ));
    }
    let total: usize = outs.iter().map(|o| o.rows).sum();
    if total != w.n || outs.iter().any(|o| o.rows == 0) {
        let rows: Vec<usize> = outs.iter().map(|o| o.rows).collect();
        return Err(invalid(
            op,
            format!("outputs of {rows:?} rows for {} rows", w.n),
        ));
    }
    let buf = outs[0].y.t.buf.id();
    if outs.iter().any(|o| o.y.t.buf.id() != buf) {
        return Err(invalid(
            op,
            "the outputs must lie in one tensor (one binding)".into(),
        ));
    }
    let n = n_tokens.max(1);
    for o in outs {
        if n > 1 && o.stride < o.rows {
            return Err(invalid(
                op,
                format!("stride {} < {} rows", o.stride, o.rows),
            ));
        }
        o.y.check(op, (n - 1) * o.stride + o.rows)?;
    }
    if let Some(b) = bias {
        b.check(op, w.n)?;
    }
    // Each output's first row in the weight.
    let mut starts = [w.first + w.n; MAX_OUTPUTS + 1];
    let mut at = w.first;
    for (j, o) in outs.iter().enumerate() {
        starts[j] = at;
        at += o.rows;
    }
    let end = w.first + w.n;
    let parts = w.w.chunks.iter().filter_map(|c| {
        let lo = w.first.max(c.first_row);
        let hi = end.min(c.first_row + c.n_rows);
        (lo < hi).then(|| {
            let n_rows = hi - lo;
            let mut split = SplitParams {
                row_base: (lo - c.first_row) as u32,
                ..SplitParams::default()
            };
            for k in 0..2 {
                split.split_end[k] = (starts[k + 1].clamp(lo, hi) - lo) as u32;
            }
            for j in 0..4 {
                // Outputs past the last repeat it (never selected).
                let o = &outs[j.min(outs.len() - 1)];
                let s = starts[j.min(outs.len() - 1)];
                split.y_offsets[j] = (o.y.offset as u64 + lo as u64).wrapping_sub(s as u64) as u32;
                split.y_strides[j] = o.stride as u32;
            }
            Part {
                chunk: c,
                n_rows,
                bias_offset: bias.map_or(0, |b| (b.offset + lo - w.first) as u32),
                split,
            }
        })
    });
    Ok(parts.collect())
}
