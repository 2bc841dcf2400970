// Output epilogue of the weight kernels (matvec, matmul) without a bias: output row `row` of
// the weight chunk is its dot product as summed. A separate file from out_bias.wgsl so that
// this variant has no bias binding and no extra read.
// y_out is the identity: the tensor-core matmul may store whole tiles straight from its
// accumulators.
const Y_OUT_IDENTITY: bool = true;

fn y_out(row: u32, v: f32) -> f32 {
    return v;
}
