// Flash-decoding reduction: row r (= t * n_heads + h) has n_splits records (o[head_dim], m, l)
// from attention.wgsl (o and l relative to that split's max m). With M = max m_s:
// out[out_offset + r * head_dim + d] = sum_s o_s[d] e^(m_s - M) / sum_s l_s e^(m_s - M).
// Empty splits have m = -3e38, l = 0, o = 0 and weigh nothing.
//
// The kernel is a few microseconds of latency, not of work, so it is one round of loads and
// one barrier: a row's head_dim is cut into chunks of `dims` (16) dims, one workgroup of 256
// per (row, chunk); invocation (d, g) of the G = WG / dims groups merges splits g, g + G, ..
// of dim d with its own running max (an online softmax over records: each trip loads 4
// splits' m, l and o[d] together, then rescales its sums to the new max), and dim d's G
// partials merge through workgroup memory. (The version before reduced every row's max and
// sum over all splits through two trees of barriers before the o loads: 3.6 us a dispatch
// more than an empty one on the H100, 2026-11-26.)

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

override WG: u32 = 256u;
const NONE: f32 = -3.0e38;

// Each invocation's partial: running max, sum of o[d] e^(m_s - max), sum of l e^(m_s - max).
var<workgroup> part_m: array<f32, WG>;
var<workgroup> part_o: array<f32, WG>;
var<workgroup> part_l: array<f32, WG>;

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
    let groups = WG / p.dims;
    let g = tid / p.dims;
    let d = chunk * p.dims + tid % p.dims;
    let last = p.n_splits - 1u;
    var m = NONE;
    var o = 0.0;
    var l = 0.0;
    for (var s = g; s < p.n_splits; s += 4u * groups) {
        let s4 = vec4<u32>(s, s + groups, s + 2u * groups, s + 3u * groups);
        let valid = s4 <= vec4<u32>(last);
        let at = rec0 + min(s4, vec4<u32>(last)) * rec_len;
        let ms = vec4<f32>(
            parts[at.x + p.head_dim],
            parts[at.y + p.head_dim],
            parts[at.z + p.head_dim],
            parts[at.w + p.head_dim],
        );
        let ls = vec4<f32>(
            parts[at.x + p.head_dim + 1u],
            parts[at.y + p.head_dim + 1u],
            parts[at.z + p.head_dim + 1u],
            parts[at.w + p.head_dim + 1u],
        );
        let os = vec4<f32>(parts[at.x + d], parts[at.y + d], parts[at.z + d], parts[at.w + d]);
        let mv = select(vec4<f32>(NONE), ms, valid);
        let mn = max(m, max(max(mv.x, mv.y), max(mv.z, mv.w)));
        // Splits past the last (and empty ones: o = l = 0) add nothing.
        let w = select(vec4<f32>(0.0), exp(mv - vec4<f32>(mn)), valid);
        let c = exp(m - mn);
        o = o * c + dot(os, w);
        l = l * c + dot(ls, w);
        m = mn;
    }
    part_m[tid] = m;
    part_o[tid] = o;
    part_l[tid] = l;
    workgroupBarrier();
    if tid < p.dims {
        var mx = NONE;
        for (var k = 0u; k < groups; k++) {
            mx = max(mx, part_m[k * p.dims + tid]);
        }
        var num = 0.0;
        var den = 0.0;
        for (var k = 0u; k < groups; k++) {
            let e = exp(part_m[k * p.dims + tid] - mx);
            num += part_o[k * p.dims + tid] * e;
            den += part_l[k * p.dims + tid] * e;
        }
        out[p.out_offset + row * p.head_dim + d] = select(0.0, num / den, den > 0.0);
    }
}
