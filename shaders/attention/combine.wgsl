// Flash-decoding reduction: row r (= t * n_heads + h) has n_splits records (o[head_dim], m, l)
// from attention.wgsl (o and l relative to that split's max m). With M = max m_s:
// out[out_offset + r * head_dim + d] = sum_s o_s[d] e^(m_s - M) / sum_s l_s e^(m_s - M).
// Empty splits have m = -3e38, l = 0 and weigh nothing. One workgroup per row.

struct Params {
    n_rows: u32,
    n_splits: u32,
    head_dim: u32,
    out_offset: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> parts: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;

override WG: u32 = 64u;

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
    let rec_len = p.head_dim + 2u;
    let rec0 = row * p.n_splits * rec_len;
    var mx = -3.0e38;
    for (var s = 0u; s < p.n_splits; s++) {
        mx = max(mx, parts[rec0 + s * rec_len + p.head_dim]);
    }
    var sum = 0.0;
    for (var s = 0u; s < p.n_splits; s++) {
        let r = rec0 + s * rec_len;
        sum += parts[r + p.head_dim + 1u] * exp(parts[r + p.head_dim] - mx);
    }
    let inv = select(0.0, 1.0 / sum, sum > 0.0);
    for (var d = tid; d < p.head_dim; d += WG) {
        var acc = 0.0;
        for (var s = 0u; s < p.n_splits; s++) {
            let r = rec0 + s * rec_len;
            acc += parts[r + d] * exp(parts[r + p.head_dim] - mx);
        }
        out[p.out_offset + row * p.head_dim + d] = acc * inv;
    }
}
