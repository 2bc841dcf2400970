// Flash-decoding reduction: row r (= t * n_heads + h) has n_splits records (o[head_dim], m, l)
// from attention.wgsl (o and l relative to that split's max m). With M = max m_s:
// out[out_offset + r * head_dim + d] = sum_s o_s[d] e^(m_s - M) / sum_s l_s e^(m_s - M).
// Empty splits have m = -3e38, l = 0 and weigh nothing. No serial walk over the splits where
// it can be avoided (one dependent load per step costs ~0.5 us on the H100): a row's head_dim
// is cut into chunks of `dims` (64) dims, one workgroup of 256 per (row, chunk); invocation
// s reads split s's (m, l) (n_splits <= WG), the max and the sum are tree reductions (the sum
// is norm/reduce.wgsl's `workgroup_sum`; every chunk's workgroup computes the same ones), and
// the output sums run over G = WG / dims groups of splits at once, four loads in flight
// each, then add up in workgroup memory. (One workgroup per row, G = 1 at head_dim 256, took
// 9 steps of 4 loads for gemma's 33 splits.)

struct Params {
    n_rows: u32,
    n_splits: u32,
    head_dim: u32,
    out_offset: u32,
    // Dims per workgroup: divides head_dim and WG.
    dims: u32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> parts: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;

// Must be 256: the splits of a row (at most 256) are spread one per invocation.
override WG: u32 = 256u;
const NONE: f32 = -3.0e38;

var<workgroup> red: array<f32, 256>;
var<workgroup> weights: array<f32, 256>;

fn reduce_max(tid: u32, v: f32) -> f32 {
    red[tid] = v;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        if tid < s {
            red[tid] = max(red[tid], red[tid + s]);
        }
        workgroupBarrier();
    }
    let r = red[0];
    workgroupBarrier();
    return r;
}

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) tid: u32,
) {
    let chunks = p.head_dim / p.dims;
    let flat = wid.y * nwg.x + wid.x;
    let row = flat / chunks;
    let chunk = flat % chunks;
    if row >= p.n_rows {
        return;
    }
    let rec_len = p.head_dim + 2u;
    let rec0 = row * p.n_splits * rec_len;
    let mine = tid < p.n_splits;
    let r_mine = rec0 + min(tid, p.n_splits - 1u) * rec_len + p.head_dim;
    let m_s = select(NONE, parts[r_mine], mine);
    let l_s = select(0.0, parts[r_mine + 1u], mine);
    let mx = reduce_max(tid, m_s);
    let w = select(0.0, exp(m_s - mx), mine);
    weights[tid] = w;
    let sum = workgroup_sum(l_s * w, tid);
    let inv = select(0.0, 1.0 / sum, sum > 0.0);

    // Invocation (d, g) sums o_s[d] w_s over the splits s = g, g + G, ... for dim d of the
    // chunk.
    let groups = WG / p.dims;
    let g = tid / p.dims;
    let d = chunk * p.dims + tid % p.dims;
    let last = p.n_splits - 1u;
    var acc = vec4<f32>(0.0);
    if g < groups {
        for (var s = g; s < p.n_splits; s += 4u * groups) {
            let s4 = vec4<u32>(s, s + groups, s + 2u * groups, s + 3u * groups);
            let c = min(s4, vec4<u32>(last));
            let o = vec4<f32>(
                parts[rec0 + c.x * rec_len + d],
                parts[rec0 + c.y * rec_len + d],
                parts[rec0 + c.z * rec_len + d],
                parts[rec0 + c.w * rec_len + d],
            );
            let wv = vec4<f32>(weights[c.x], weights[c.y], weights[c.z], weights[c.w]);
            acc += o * select(vec4<f32>(0.0), wv, s4 <= vec4<u32>(last));
        }
    }
    red[tid] = acc.x + acc.y + acc.z + acc.w;
    workgroupBarrier();
    if tid < p.dims {
        var total = 0.0;
        for (var k = 0u; k < groups; k++) {
            total += red[k * p.dims + tid];
        }
        out[p.out_offset + row * p.head_dim + chunk * p.dims + tid] = total * inv;
    }
}
