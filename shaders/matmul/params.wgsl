// The prompt matmul's contract, shared by `matmul.wgsl` (f32 FMAs) and `matmul_coop.wgsl`
// (tensor cores): Y[t, r] = sum_i X[t, i] * W[r, i] for the rows r of one weight chunk.
// X row t starts at x_offset + t * x_stride; Y[t, r] is y[y_offset + t * y_stride + r], as
// `y_out(r, sum)` of the output epilogue gives it (common/out_store.wgsl, common/out_bias.wgsl).

struct Params {
    n_in: u32,
    n_rows: u32,
    row_bytes: u32,
    n_tokens: u32,
    x_offset: u32,
    x_stride: u32,
    y_offset: u32,
    y_stride: u32,
    // The bias of this chunk's row 0 (common/out_bias.wgsl). Unused by out_store.wgsl.
    bias_offset: u32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> w: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
// The weight chunk once more, as words, for the scalar reads of common/blocks.wgsl (a vec4
// load there would fetch 16 bytes to use 4).
@group(0) @binding(4) var<storage, read> w_words: array<u32>;
