// Split K's second half: the tensor-core matmul's k_splits partial products (split z's at
// src_offset + z * slice, token-major, n_rows a token) added up in split order into
// y[y_offset + t * y_stride + r]. One invocation an output.

struct Params {
    n_rows: u32,
    n_tokens: u32,
    k_splits: u32,
    slice: u32,
    src_offset: u32,
    y_offset: u32,
    y_stride: u32,
    _pad0: u32,
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
    y[p.y_offset + t * p.y_stride + i % p.n_rows] = sum;
}
