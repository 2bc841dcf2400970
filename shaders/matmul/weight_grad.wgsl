// The weight gradient of a trainable f32 matrix (a LoRA A or B): dW[o, i] (+)= sum_t dY[t, o]
// X[t, i] over the n_tokens tokens, one product over the whole sequence. dY[t, o] is
// dy[dy_offset + t * dy_stride + o], X[t, i] is x[x_offset + t * x_stride + i] and dW[o, i]
// is dw[dw_offset + o * n_in + i] (rows of n_in, as the weight is stored), which the dispatch
// adds to when `accumulate` is set (gradient accumulation over micro-batches) and overwrites
// otherwise.
//
// Split over the tokens (the grid's z, ops/split_sum.rs): split z sums tokens
// z tokens_per_split .. (z + 1) tokens_per_split and writes its partial dW split_stride
// elements after dw_offset times z; one split (z = 0, tokens_per_split = n_tokens) is the
// whole product.
//
// Workgroup (row tile, input tile) of 128 computes 64 rows x 64 inputs of dW through
// matmul/grad_tile.wgsl, walking the tokens BK = 32 at a time. Per step, invocation i reads
// column i % 64 of the tile's dY and X for tokens i / 64 + 2m (m < 16): each subgroup load is
// 32 consecutive floats of one token row; both tiles are stored transposed (rows x tokens).

// Params and bindings: matmul/weight_grad_params.wgsl.

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(local_invocation_index) tid: u32,
) {
    let o0 = wid.x * TM;
    let i0 = wid.y * TN;

    // Staging role: tile column `sc` (a row of dW for dY, an input for X), tokens sk + 2m.
    let sc = tid % TM;
    let sk = tid / TM;
    let o_ok = o0 + sc < p.n_out;
    let i_ok = i0 + sc < p.n_in;
    // Compute role.
    let tr = tid % 8u;
    let tt = tid / 8u;

    let t_begin = min(wid.z * p.tokens_per_split, p.n_tokens);
    let t_end = min(t_begin + p.tokens_per_split, p.n_tokens);
    let steps = (t_end - t_begin + BK - 1u) / BK;
    for (var s = 0u; s < steps; s++) {
        for (var m = 0u; m < BK / 2u; m++) {
            let k = sk + 2u * m;
            let t = t_begin + BK * s + k;
            var a = 0.0;
            var b = 0.0;
            if t < t_end {
                if o_ok {
                    a = dy[p.dy_offset + t * p.dy_stride + o0 + sc];
                }
                if i_ok {
                    b = x[p.x_offset + t * p.x_stride + i0 + sc];
                }
            }
            ta_set(sc, k, a);
            tb_set(sc, k, b);
        }
        workgroupBarrier();
        tile_products(tr, tt);
        workgroupBarrier();
    }

    for (var a = 0u; a < 8u; a++) {
        let o = o0 + tr + 8u * a;
        for (var b = 0u; b < 4u; b++) {
            let i = i0 + tt + 16u * b;
            if o < p.n_out && i < p.n_in {
                let at = p.dw_offset + wid.z * p.split_stride + o * p.n_in + i;
                var v = acc_row(a)[b];
                if p.accumulate != 0u {
                    v = dw[at] + v;
                }
                dw[at] = v;
            }
        }
    }
}
