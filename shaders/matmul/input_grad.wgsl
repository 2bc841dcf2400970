// The matmul's backward through its weight: dX[t, i] (+)= sum_r dY[t, r] W[row0 + r, i] over
// the n_rows rows r of one weight chunk that this dispatch sums (W stays in its block format,
// decoded by the format file's `decode_half` as the forward decodes it). dY is bound as `x`
// and dX as `y` (matmul/input_grad_params.wgsl). The dispatch adds to dX when `accumulate`
// is set (a later chunk's rows, or a gradient another product already wrote) and overwrites
// it otherwise.
//
// Workgroup (input tile, token tile) of 128 computes 64 inputs x 64 tokens through
// matmul/grad_tile.wgsl, walking the weight's rows BK = 32 at a time. Per step:
// - `ta` (inputs x rows): invocation i decodes the 16 weights (i % 4) * 16 .. of the tile's
//   64 inputs (two units) in row i / 4 of the step, and stores them transposed.
// - `tb` (tokens x rows): invocation i reads row i % 32 of dY for tokens i / 32 + 4m (m <
//   16), as the forward reads X: each subgroup load is 32 consecutive floats of one dY row.

// Params, bindings and `stage_w_quarter`: matmul/input_grad_params.wgsl.

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(local_invocation_index) tid: u32,
) {
    let in0 = wid.x * TM;
    let tok0 = wid.y * TN;
    let units = (p.n_in + BK - 1u) / BK;

    // Weight staging role: step row `sr`, the tile's inputs 16 sq .. 16 sq + 15.
    let sr = tid / 4u;
    let sq = tid % 4u;
    let u = 2u * wid.x + sq / 2u;
    let u_ok = u < units;
    let uc = min(u, units - 1u);
    // dY staging role.
    let yc = tid % BK;
    let yt = tid / BK;
    // Compute role.
    let tr = tid % 8u;
    let tt = tid / 8u;

    let r_begin = min(wid.z * p.rows_per_split, p.n_rows);
    let r_end = min(r_begin + p.rows_per_split, p.n_rows);
    let steps = (r_end - r_begin + BK - 1u) / BK;
    for (var s = 0u; s < steps; s++) {
        let r0 = r_begin + BK * s;
        let row_ok = r0 + sr < r_end;
        let wrow = (p.row0 + min(r0 + sr, p.n_rows - 1u)) * p.row_bytes;
        let q = stage_w_quarter(wrow, uc, sq % 2u, row_ok && u_ok);
        for (var c = 0u; c < 4u; c++) {
            for (var j = 0u; j < 4u; j++) {
                ta_set(16u * sq + 4u * c + j, sr, q[c][j]);
            }
        }
        let in_r = r0 + yc < r_end;
        for (var m = 0u; m < TN / 4u; m++) {
            let t = yt + 4u * m;
            var v = 0.0;
            if in_r && tok0 + t < p.n_tokens {
                v = x[p.dy_offset + (tok0 + t) * p.dy_stride + r0 + yc];
            }
            tb_set(t, yc, v);
        }
        workgroupBarrier();
        tile_products(tr, tt);
        workgroupBarrier();
    }

    let split_at = wid.z * p.split_stride;
    for (var a = 0u; a < 8u; a++) {
        let i = in0 + tr + 8u * a;
        for (var b = 0u; b < 4u; b++) {
            let t = tok0 + tt + 16u * b;
            if i < p.n_in && t < p.n_tokens {
                let at = p.dx_offset + split_at + t * p.dx_stride + i;
                var v = acc_row(a)[b];
                if p.accumulate != 0u {
                    v = y[at] + v;
                }
                y[at] = v;
            }
        }
    }
}
