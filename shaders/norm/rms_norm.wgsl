// RMS norm of each row of n elements: y = x / sqrt(mean(x^2) + eps) [* weight].
// Row r reads x[x_offset + r*n ..] and writes y[y_offset + r*n ..]; the weight (length n) is
// shared by all rows, so one dispatch normalises a whole vector (1 row) or every head of
// [n_heads, head_dim] (n_heads rows). One workgroup of 256 per row, four loads in flight per
// invocation: with one workgroup per row nothing else hides a load's latency, and a loop of
// one dependent load per iteration costs ~0.5 us an iteration (64 invocations over 2560
// values: 27 us measured on the H100; 256 x 4 takes that to 3 iterations). The bindings and the accessors
// `load_x` / `store_y` come from `io_separate.wgsl` (x read, y written) or `io_inplace.wgsl`
// (one read-write buffer: y_offset is x_offset), so per-head q/k norms need no scratch.
// The workgroup sum comes from `norm/reduce.wgsl`.

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

override WG: u32 = 256u;

// 1 / rms of row `row`; every invocation of the workgroup gets the same value (the tree
// reduction is `workgroup_sum` in norm/reduce.wgsl).
fn inv_rms(row: u32, tid: u32) -> f32 {
    let base = p.x_offset + row * p.n;
    var acc = vec4<f32>(0.0);
    for (var i = tid; i < p.n; i += 4u * WG) {
        let v = load_quad(base, quad(i));
        acc += v * v;
    }
    let ss = workgroup_sum(acc.x + acc.y + acc.z + acc.w, tid);
    return 1.0 / sqrt(ss / f32(p.n) + p.eps);
}

// x[base + i] for i < n, else 0 (the index is clamped so the load is always in bounds).
fn load_or_zero(base: u32, i: u32) -> f32 {
    return select(0.0, load_x(base + min(i, p.n - 1u)), i < p.n);
}

fn row_index(wid: vec3<u32>, nwg: vec3<u32>) -> u32 {
    return wid.y * nwg.x + wid.x;
}

// The four indices an invocation handles per step of the output loops (loads first, then
// the stores, so the four loads are in flight together).
fn quad(i: u32) -> vec4<u32> {
    return vec4<u32>(i, i + WG, i + 2u * WG, i + 3u * WG);
}

fn load_quad(base: u32, j: vec4<u32>) -> vec4<f32> {
    return vec4<f32>(
        load_or_zero(base, j.x),
        load_or_zero(base, j.y),
        load_or_zero(base, j.z),
        load_or_zero(base, j.w),
    );
}

fn store_quad(row: u32, j: vec4<u32>, v: vec4<f32>) {
    for (var k = 0u; k < 4u; k++) {
        if j[k] < p.n {
            store_y(row * p.n + j[k], v[k]);
        }
    }
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
    let base = p.x_offset + row * p.n;
    for (var i = tid; i < p.n; i += 4u * WG) {
        let j = quad(i);
        store_quad(row, j, load_quad(base, j) * r);
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
    let base = p.x_offset + row * p.n;
    for (var i = tid; i < p.n; i += 4u * WG) {
        let j = quad(i);
        let last = p.n - 1u;
        let g = vec4<f32>(
            weight[min(j.x, last)],
            weight[min(j.y, last)],
            weight[min(j.z, last)],
            weight[min(j.w, last)],
        );
        store_quad(row, j, load_quad(base, j) * r * g);
    }
}
