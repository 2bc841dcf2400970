// y[y_offset + r] = sum_i W[r, i] * x[x_offset + i] for the rows r of one weight chunk.
// W is GGUF's layout: rows of n_in weights, row_bytes each, decoded by the format file's
// `decode_unit` 32 weights at a time. One workgroup per row: each invocation takes every WG-th
// unit of 32, then the workgroup sums its partials in workgroup memory.

struct Params {
    n_in: u32,
    n_rows: u32,
    row_bytes: u32,
    x_offset: u32,
    y_offset: u32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> w: array<u32>;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;

override WG: u32 = 64u;
var<workgroup> partial: array<f32, 256>;

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) tid: u32,
) {
    let row = wid.y * nwg.x + wid.x;
    if row >= p.n_rows {
        return;
    }
    let units = (p.n_in + 31u) / 32u;
    let row_base = row * p.row_bytes;
    var acc = 0.0;
    for (var u = tid; u < units; u += WG) {
        decode_unit(row_base + (u / BLOCK_UNITS) * BLOCK_BYTES, u % BLOCK_UNITS);
        let x0 = p.x_offset + 32u * u;
        let valid = min(32u, p.n_in - 32u * u);
        for (var j = 0u; j < valid; j++) {
            acc += unit_w[j] * x[x0 + j];
        }
    }
    partial[tid] = acc;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        if tid < s {
            partial[tid] += partial[tid + s];
        }
        workgroupBarrier();
    }
    if tid == 0u {
        y[p.y_offset + row] = partial[0];
    }
}
