// Y[t, r] = sum_i X[t, i] * W[r, i] for a block of tokens (prefill): the rows r of one weight
// chunk, decoded by the format file's `decode_half` (16 of a unit's 32 weights).
// X row t starts at x_offset + t * x_stride; Y[t, r] is y[y_offset + t * y_stride + r].
//
// Workgroup (row tile, token tile) of 128 invocations computes 64 rows x 64 tokens, walking the
// inputs one unit (BK = 32) at a time. Per unit, every invocation stages 16 weights and 16
// inputs in workgroup memory, then accumulates 8 rows x 4 tokens (32 outputs, in
// matmul/acc8.wgsl's named registers) from it:
// - W tile: invocation i decodes half i % 2 of row i / 2's unit (one `decode_half`, vec4 loads
//   for the common formats) and stores 4 vec4s.
// - X tile: invocation i reads column i % 32 of tokens i / 32 + 4m (m < 16): each subgroup
//   load is 32 consecutive floats of one token row, any alignment.
// - Both tiles are [row][BK] in vec4s with a row stride of RS = 9 vec4s (36 words): the 8 row
//   (or 4 token) vec4s a subgroup reads at once start in distinct banks.
// - Invocation (tr, tt) = (i % 8, i / 8) owns rows tr + 8a (a < 8) and tokens tt + 16b
//   (b < 4), interleaved so that neighbouring invocations read neighbouring rows. Per 4
//   inputs it loads 8 + 4 vec4s and does 128 FMAs; each output sums its products in input
//   order with one FMA each.
// - Y[t, r] goes through `y_out(r, sum)` of the value file (common/out_store.wgsl: the sum;
//   common/out_bias.wgsl: plus the bias of row r), and the place file says which chunk row
//   dispatch row r reads (`w_row`) and where it lands (`y_index`): common/out_one.wgsl (row
//   r, at the index above) or common/out_split.wgsl (a row range split over up to 3
//   outputs, each with its own offset and token stride).

// Params and bindings: matmul/params.wgsl, X as f32s:
@group(0) @binding(2) var<storage, read> x: array<f32>;

// Must be 128 (8 x 16 invocations over 64 rows x 64 tokens).
override WG: u32 = 128u;
const TM: u32 = 64u;
const TN: u32 = 64u;
const BK: u32 = 32u;
const RS: u32 = 9u;

var<workgroup> ws: array<vec4<f32>, 576>; // TM * RS
var<workgroup> xs: array<vec4<f32>, 576>; // TN * RS

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(local_invocation_index) tid: u32,
) {
    let row0 = wid.x * TM;
    let tok0 = wid.y * TN;

    // Staging roles. Rows past the chunk read its last row (in bounds) and store zeros.
    let dr = tid / 2u;
    let dh = tid % 2u;
    let row_ok = row0 + dr < p.n_rows;
    let wrow = w_row(min(row0 + dr, p.n_rows - 1u)) * p.row_bytes;
    let xc = tid % BK;
    let xt = tid / BK;

    // Compute role.
    let tr = tid % 8u;
    let tt = tid / 8u;

    let units = (p.n_in + BK - 1u) / BK;
    for (var u = 0u; u < units; u++) {
        let k0 = BK * u;
        let q = stage_w_half(wrow, u, dh, row_ok);
        for (var c = 0u; c < 4u; c++) {
            ws[dr * RS + 4u * dh + c] = q[c];
        }
        let in_k = k0 + xc < p.n_in;
        for (var m = 0u; m < TN / 4u; m++) {
            let t = xt + 4u * m;
            var v = 0.0;
            if in_k && tok0 + t < p.n_tokens {
                v = x[p.x_offset + (tok0 + t) * p.x_stride + k0 + xc];
            }
            xs[t * RS + xc / 4u][xc % 4u] = v;
        }
        workgroupBarrier();
        for (var kq = 0u; kq < BK / 4u; kq++) {
            let x0 = xs[tt * RS + kq];
            let x1 = xs[(tt + 16u) * RS + kq];
            let x2 = xs[(tt + 32u) * RS + kq];
            let x3 = xs[(tt + 48u) * RS + kq];
            // Input kq * 4 + c of the 4 tokens.
            let c0 = vec4<f32>(x0.x, x1.x, x2.x, x3.x);
            let c1 = vec4<f32>(x0.y, x1.y, x2.y, x3.y);
            let c2 = vec4<f32>(x0.z, x1.z, x2.z, x3.z);
            let c3 = vec4<f32>(x0.w, x1.w, x2.w, x3.w);
            acc0 = fma_row(acc0, ws[tr * RS + kq], c0, c1, c2, c3);
            acc1 = fma_row(acc1, ws[(tr + 8u) * RS + kq], c0, c1, c2, c3);
            acc2 = fma_row(acc2, ws[(tr + 16u) * RS + kq], c0, c1, c2, c3);
            acc3 = fma_row(acc3, ws[(tr + 24u) * RS + kq], c0, c1, c2, c3);
            acc4 = fma_row(acc4, ws[(tr + 32u) * RS + kq], c0, c1, c2, c3);
            acc5 = fma_row(acc5, ws[(tr + 40u) * RS + kq], c0, c1, c2, c3);
            acc6 = fma_row(acc6, ws[(tr + 48u) * RS + kq], c0, c1, c2, c3);
            acc7 = fma_row(acc7, ws[(tr + 56u) * RS + kq], c0, c1, c2, c3);
        }
        workgroupBarrier();
    }

    for (var a = 0u; a < 8u; a++) {
        let row = row0 + tr + 8u * a;
        for (var b = 0u; b < 4u; b++) {
            let t = tok0 + tt + 16u * b;
            if row < p.n_rows && t < p.n_tokens {
                y[y_index(row, t, p.y_offset + t * p.y_stride + row)] = y_out(row, acc_row(a)[b]);
            }
        }
    }
}
