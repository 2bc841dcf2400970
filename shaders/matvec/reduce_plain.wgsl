// Matvec entry point without subgroup operations: each quad's partial sums reduced by a tree
// over its WG / QUADS slots of workgroup memory (any count; ceil(log2) barriers).

// Row r's total of this invocation's quad, after the tree: the quad's first slot. Any lane
// may ask for any row (the GLU epilogue's lane t takes gate row t and up row t + 2).
fn quad_total(r: u32) -> f32 {
    return red[r * 256u + quad * (WG / QUADS)];
}

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) tid: u32,
) {
    let first = first_row(wid, nwg);
    if first >= p.n_rows {
        return;
    }
    let lanes = WG / QUADS;
    quad = tid / lanes;
    let t = tid % lanes;
    let row0 = first + R * quad;
    let acc = accumulate(row0, t, tid);
    for (var r = 0u; r < R; r++) {
        red[r * 256u + tid] = acc[r];
    }
    workgroupBarrier();
    for (var s = first_stride(lanes); s > 0u; s >>= 1u) {
        if t < s && t + s < lanes {
            for (var r = 0u; r < R; r++) {
                red[r * 256u + tid] += red[r * 256u + tid + s];
            }
        }
        workgroupBarrier();
    }
    store_rows(row0, t, tid, quad_total(min(t, R - 1u)));
}
