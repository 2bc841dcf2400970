// The second half of a product split over its sum (the training gradients' split products,
// ops/split_sum.rs): out[r, c] (+)= sum over z of src[src_offset + z * slice + r * n_cols + c],
// the slices added in split order onto what out holds (`accumulate`) or onto zero, out[r, c]
// being out[out_offset + r * out_stride + c]. One invocation an element.

struct Params {
    n_rows: u32,
    n_cols: u32,
    slices: u32,
    slice: u32,
    src_offset: u32,
    out_offset: u32,
    out_stride: u32,
    accumulate: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> src: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;

override WG: u32 = 256u;

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) tid: u32,
) {
    let i = (wid.y * nwg.x + wid.x) * WG + tid;
    if i >= p.n_rows * p.n_cols {
        return;
    }
    let at = p.out_offset + (i / p.n_cols) * p.out_stride + i % p.n_cols;
    var sum = 0.0;
    if p.accumulate != 0u {
        sum = out[at];
    }
    for (var z = 0u; z < p.slices; z++) {
        sum += src[p.src_offset + z * p.slice + i];
    }
    out[at] = sum;
}
