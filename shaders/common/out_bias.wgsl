// Output epilogue of the weight kernels (matvec, matmul) with a bias (Qwen 2's q/k/v):
// y = sum + bias[p.bias_offset + row], where `row` counts the dispatch's rows (the weight
// chunk's; with split outputs, those from its row_base) and `bias_offset` is the bias view's
// offset plus the global row of the dispatch's first, so every chunk of a split weight adds
// its own rows' bias. The sum is finished first and rounded once more by the
// add: the same value as the matrix product followed by a separate add.
@group(0) @binding(5) var<storage, read> bias: array<f32>;

// Not the identity: the tensor-core matmul writes every element through y_out.
const Y_OUT_IDENTITY: bool = false;

fn y_out(row: u32, v: f32) -> f32 {
    return v + bias[p.bias_offset + row];
}
