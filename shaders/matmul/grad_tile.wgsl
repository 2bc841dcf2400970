// The products of the matmul's backward (matmul/input_grad.wgsl, matmul/weight_grad.wgsl)
// share the forward's arithmetic (matmul/matmul.wgsl): a workgroup of 128 accumulates a
// 64 x 64 output tile in f32 from two tiles in workgroup memory, `ta` (the tile's 64 output
// rows) and `tb` (its 64 output columns), each [64][BK] in vec4s over BK = 32 summed
// indices with a row stride of RS = 9 vec4s (the 8 vec4s a subgroup reads at once start in
// distinct banks). The kernels differ only in what they stage (and how: the summed index is
// the weight's row or the token, so their loads transpose) and where they store.
//
// Invocation (tr, tt) = (i % 8, i / 8) owns tile rows tr + 8a (a < 8) and columns tt + 16b
// (b < 4) in component b of `acc<a>`; each output sums its products in index order, one FMA
// each. The accumulators: matmul/acc8.wgsl.

// Must be 128 (8 x 16 invocations over 64 x 64 outputs).
override WG: u32 = 128u;
const TM: u32 = 64u;
const TN: u32 = 64u;
const BK: u32 = 32u;
const RS: u32 = 9u;

var<workgroup> ta: array<vec4<f32>, 576>; // TM * RS
var<workgroup> tb: array<vec4<f32>, 576>; // TN * RS

// Element (m, k) of a staged tile, as a scalar store (the kernels stage transposed).
fn ta_set(m: u32, k: u32, v: f32) {
    ta[m * RS + k / 4u][k % 4u] = v;
}

fn tb_set(n: u32, k: u32, v: f32) {
    tb[n * RS + k / 4u][k % 4u] = v;
}

// acc<a>[b] += sum_k ta[tr + 8a][k] tb[tt + 16b][k] over the BK staged indices.
fn tile_products(tr: u32, tt: u32) {
    for (var kq = 0u; kq < BK / 4u; kq++) {
        let b0 = tb[tt * RS + kq];
        let b1 = tb[(tt + 16u) * RS + kq];
        let b2 = tb[(tt + 32u) * RS + kq];
        let b3 = tb[(tt + 48u) * RS + kq];
        // Index kq * 4 + c of the 4 columns.
        let c0 = vec4<f32>(b0.x, b1.x, b2.x, b3.x);
        let c1 = vec4<f32>(b0.y, b1.y, b2.y, b3.y);
        let c2 = vec4<f32>(b0.z, b1.z, b2.z, b3.z);
        let c3 = vec4<f32>(b0.w, b1.w, b2.w, b3.w);
        acc0 = fma_row(acc0, ta[tr * RS + kq], c0, c1, c2, c3);
        acc1 = fma_row(acc1, ta[(tr + 8u) * RS + kq], c0, c1, c2, c3);
        acc2 = fma_row(acc2, ta[(tr + 16u) * RS + kq], c0, c1, c2, c3);
        acc3 = fma_row(acc3, ta[(tr + 24u) * RS + kq], c0, c1, c2, c3);
        acc4 = fma_row(acc4, ta[(tr + 32u) * RS + kq], c0, c1, c2, c3);
        acc5 = fma_row(acc5, ta[(tr + 40u) * RS + kq], c0, c1, c2, c3);
        acc6 = fma_row(acc6, ta[(tr + 48u) * RS + kq], c0, c1, c2, c3);
        acc7 = fma_row(acc7, ta[(tr + 56u) * RS + kq], c0, c1, c2, c3);
    }
}
