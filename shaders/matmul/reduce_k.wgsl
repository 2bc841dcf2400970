// Split K's second half: the tensor-core matmul's k_splits partial products (split z's at
// src_offset + z * slice, token-major, n_rows a token) added up in split order, then stored as
// the one-dispatch product would store them: through `y_out(row, sum)` of the value file
// (common/out_store.wgsl, or common/out_bias.wgsl: the bias added to the finished sum) at
// `y_index` of the place file (common/out_one.wgsl: y[y_offset + t * y_stride + r], or
// common/out_split.wgsl: the rows of a stacked weight split over its outputs). One invocation
// an output.

struct Params {
    n_rows: u32,
    n_tokens: u32,
    k_splits: u32,
    slice: u32,
    src_offset: u32,
    y_offset: u32,
    y_stride: u32,
    // The bias of row 0 (common/out_bias.wgsl). Unused by out_store.wgsl.
    bias_offset: u32,
    // Split outputs (common/split_params.wgsl). Unused by out_one.wgsl.
    split: SplitParams,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> src: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;

override WG: u32 = 256u;

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) tid: u32,
) {
    let i = (wid.y * nwg.x + wid.x) * WG + tid;
    if i >= p.n_rows * p.n_tokens {
        return;
    }
    var sum = src[p.src_offset + i];
    for (var z = 1u; z < p.k_splits; z++) {
        sum += src[p.src_offset + z * p.slice + i];
    }
    let t = i / p.n_rows;
    let r = i % p.n_rows;
    y[y_index(r, t, p.y_offset + t * p.y_stride + r)] = y_out(r, sum);
}
