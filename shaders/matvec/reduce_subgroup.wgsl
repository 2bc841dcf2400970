// Matvec entry point with subgroup operations (Features::SUBGROUP): each subgroup sums its
// partials with subgroupAdd, one lane stores the subgroup's sum, and invocation r adds the
// num_subgroups sums of row r in subgroup order (deterministic). One barrier.

// This invocation's subgroup, its lane in it and the workgroup's subgroup count, for the
// norm input's sums (matvec/sum_subgroup.wgsl).
var<private> sg_index: u32;
var<private> sg_lane: u32;
var<private> sg_count: u32;

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) tid: u32,
    @builtin(subgroup_id) sg: u32,
    @builtin(subgroup_invocation_id) lane: u32,
    @builtin(num_subgroups) n_sg: u32,
) {
    sg_index = sg;
    sg_lane = lane;
    sg_count = n_sg;
    let row0 = first_row(wid, nwg);
    if row0 >= p.n_rows {
        return;
    }
    let acc = subgroupAdd(accumulate(row0, tid));
    if lane == 0u {
        for (var r = 0u; r < R; r++) {
            red[r * 256u + sg] = acc[r];
        }
    }
    workgroupBarrier();
    var v = 0.0;
    if tid < R {
        for (var i = 0u; i < n_sg; i++) {
            v += red[tid * 256u + i];
        }
    }
    store_rows(row0, tid, v);
}
