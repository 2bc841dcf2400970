// Matvec entry point without subgroup operations: partial sums reduced by a tree in
// workgroup memory (log2(WG) barriers).

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) tid: u32,
) {
    let row0 = first_row(wid, nwg);
    if row0 >= p.n_rows {
        return;
    }
    let acc = accumulate(row0, tid);
    for (var r = 0u; r < R; r++) {
        red[r * 256u + tid] = acc[r];
    }
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        if tid < s {
            for (var r = 0u; r < R; r++) {
                red[r * 256u + tid] += red[r * 256u + tid + s];
            }
        }
        workgroupBarrier();
    }
    store_rows(row0, tid, red[min(tid, R - 1u) * 256u]);
}
