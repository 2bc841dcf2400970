// The squared global norm of a gradient, sum_i g_i^2 over n values at g_offset, in two
// dispatches with a fixed order of additions (no atomics: the same gradient gives the same
// bits on every run). out[out_offset] receives the total; out[out_offset + 1 + j] the partial
// sum of workgroup j of the first dispatch.
//   partials: workgroup j sums the squares of its CHUNK = K WG values from j CHUNK, K per
//             invocation (consecutive invocations read consecutive values), then a tree
//             (norm/reduce.wgsl's workgroup_sum).
//   total:    one workgroup sums the n_partials partial sums the same way.

struct Params {
    n: u32,
    g_offset: u32,
    out_offset: u32,
    n_partials: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> g: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;

override WG: u32 = 256u;
// Values an invocation squares in the first dispatch.
const K: u32 = 16u;

@compute @workgroup_size(WG)
fn partials(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) tid: u32,
) {
    let j = wid.y * nwg.x + wid.x;
    if j >= p.n_partials {
        return;
    }
    let first = j * K * WG;
    var acc = 0.0;
    for (var k = 0u; k < K; k++) {
        let i = first + k * WG + tid;
        if i < p.n {
            let v = g[p.g_offset + i];
            acc += v * v;
        }
    }
    let sum = workgroup_sum(acc, tid);
    if tid == 0u {
        out[p.out_offset + 1u + j] = sum;
    }
}

@compute @workgroup_size(WG)
fn total(@builtin(local_invocation_index) tid: u32) {
    var acc = 0.0;
    for (var j = tid; j < p.n_partials; j += WG) {
        acc += out[p.out_offset + 1u + j];
    }
    let sum = workgroup_sum(acc, tid);
    if tid == 0u {
        out[p.out_offset] = sum;
    }
}
