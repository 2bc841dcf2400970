//! The GLU epilogue of the decode matvec: over gate|up stacked in one weight (gate's `n_ff`
//! rows, then up's), one dispatch stores `y[i] = act(gate_i . x) * (up_i . x)` for
//! `i < n_ff`: a gated FFN's GLU without a `glu` dispatch and without its 2 `n_ff` products
//! going through memory; the down projection then reads a plain vector.
//!
//! WGSL: the matvec's skeleton, input, reduce, format and dot files with the store file
//! `matvec/out_glu.wgsl` (+ `elementwise/act.wgsl`, the `ACT` override) for
//! `matvec/out_rows.wgsl` and the epilogue's value and place files. A workgroup's 4 dispatch
//! rows are (gate 2k, gate 2k + 1, up 2k, up 2k + 1) (`w_row` of `out_glu.wgsl`); after the
//! reduce, the 4 totals go through workgroup memory and lanes 0 and 1 store outputs 2k and
//! 2k + 1. Each row is summed exactly as the plain matvec sums it (the lanes' parts and the
//! reduce do not depend on a row's slot), and the activation is the glu kernel's expression,
//! so the output equals the split product followed by `glu`, bit for bit
//! (`tests::equals_product_then_glu`). With `n_ff` odd the last workgroup's second pair
//! re-reads gate and up row `n_ff - 1` and stores nothing for it.
//!
//! The input is a vector or a q8 vector ([`Input::Plain`], [`Input::Q8`]); the GLU input
//! ([`Input::Glu`]) would be a second GLU and is refused. gate and up must lie in one weight
//! chunk (one binding): [`glu_out_supported`] says whether they do.

use crate::error::GpuError;
use crate::op::Op;
use crate::ops::epilogue::Epilogue;
use crate::ops::glu::Activation;
use crate::ops::split::SplitParams;
use crate::tensor::{View, WeightChunk, WeightRows};

use super::{Input, MatvecKernel, Outputs, Place, invalid};

/// The weight chunk that holds rows `w` when they can be the gate|up of a GLU epilogue: an
/// even number of them (gate's n_ff, then up's), at least 2, all in one chunk.
fn glu_chunk<'a>(w: WeightRows<'a>) -> Result<&'a WeightChunk, GpuError> {
    const OP: &str = "matvec_glu_out";
    w.check(OP)?;
    if !w.n.is_multiple_of(2) {
        return Err(invalid(
            OP,
            format!("{} rows: not gate and up of n_ff rows each", w.n),
        ));
    }
    let end = w.first + w.n;
    w.w.chunks
        .iter()
        .find(|c| c.first_row <= w.first && end <= c.first_row + c.n_rows)
        .ok_or_else(|| {
            invalid(
                OP,
                format!("rows {}..{end} straddle two weight chunks", w.first),
            )
        })
}

/// Whether rows `w` of a weight can be the gate|up of [`matvec_glu_out`]: an even number, in
/// one weight chunk (a stack larger than one binding is not: the lowering then keeps the
/// GLU apart).
pub fn glu_out_supported(w: WeightRows<'_>) -> bool {
    glu_chunk(w).is_ok()
}

/// `y[y.offset + i] = act((W_gate x)[i]) * (W_up x)[i]` for `i < n_ff = w.n / 2`, where
/// `w` is gate|up: rows `w.first .. w.first + n_ff` of the weight are gate's, the next
/// `n_ff` up's (a stacked upload). One dispatch; `x` a vector or a q8 vector of the weight's
/// `n_in` inputs, `y` another tensor.
pub fn matvec_glu_out(
    w: WeightRows<'_>,
    act: Activation,
    input: Input<'_>,
    y: View<'_>,
) -> Result<Vec<Op>, GpuError> {
    let chunk = glu_chunk(w)?;
    let n_ff = w.n / 2;
    y.check("matvec_glu_out y", n_ff)?;
    if let Input::Glu { .. } = input {
        return Err(invalid(
            "matvec_glu_out",
            "a GLU input to a GLU epilogue (its input is a vector or a q8 vector)".into(),
        ));
    }
    let s = w.w.shape;
    let bound = input.bind(s, Epilogue::STORE)?;
    let kernel = MatvecKernel::GluOut(s.format, bound.kind, act);
    let bound = super::Bound { kernel, ..bound };
    let place = Place {
        // Whole fours: (gate 2k, gate 2k + 1, up 2k, up 2k + 1) per workgroup.
        n_rows: 4 * n_ff.div_ceil(2),
        y_offset: y.offset as u32,
        bias_offset: 0,
        split: SplitParams {
            row_base: (w.first - chunk.first_row) as u32,
            split_end: [n_ff as u32, 0],
            ..SplitParams::default()
        },
    };
    let to = Outputs {
        y: &y.t.buf,
        bias: None,
    };
    Ok(vec![bound.op(s, &chunk.buf, &to, place)])
}
