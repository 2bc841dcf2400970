// RMS norm of each row of n elements: y = x / sqrt(mean(x^2) + eps) [* weight].
// Row r reads x[x_offset + r*n ..] and writes y[y_offset + r*n ..]; the weight (length n) is
// shared by all rows, so one dispatch normalises a whole vector (1 row) or every head of
// [n_heads, head_dim] (n_heads rows). One workgroup per row. The bindings and the accessors
// `load_x` / `store_y` come from `io_separate.wgsl` (x read, y written) or `io_inplace.wgsl`
// (one read-write buffer: y_offset is x_offset), so per-head q/k norms need no scratch.

struct Params {
    n: u32,
    n_rows: u32,
    x_offset: u32,
    y_offset: u32,
    eps: f32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> p: Params;

override WG: u32 = 64u;
var<workgroup> partial: array<f32, 256>;

// 1 / rms of row `row`; every invocation of the workgroup gets the same value.
fn inv_rms(row: u32, tid: u32) -> f32 {
    let base = p.x_offset + row * p.n;
    var acc = 0.0;
    for (var i = tid; i < p.n; i += WG) {
        let v = load_x(base + i);
        acc += v * v;
    }
    partial[tid] = acc;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        if tid < s {
            partial[tid] += partial[tid + s];
        }
        workgroupBarrier();
    }
    return 1.0 / sqrt(partial[0] / f32(p.n) + p.eps);
}

fn row_index(wid: vec3<u32>, nwg: vec3<u32>) -> u32 {
    return wid.y * nwg.x + wid.x;
}

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) tid: u32,
) {
    let row = row_index(wid, nwg);
    if row >= p.n_rows {
        return;
    }
    let r = inv_rms(row, tid);
    for (var i = tid; i < p.n; i += WG) {
        store_y(row * p.n + i, load_x(p.x_offset + row * p.n + i) * r);
    }
}

@compute @workgroup_size(WG)
fn main_weighted(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) tid: u32,
) {
    let row = row_index(wid, nwg);
    if row >= p.n_rows {
        return;
    }
    let r = inv_rms(row, tid);
    for (var i = tid; i < p.n; i += WG) {
        store_y(row * p.n + i, load_x(p.x_offset + row * p.n + i) * r * weight[i]);
    }
}
