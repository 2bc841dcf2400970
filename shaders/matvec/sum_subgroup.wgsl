// The workgroup sum of the norm input's scales (matvec/x_norm.wgsl, matvec/addend_normed.wgsl)
// in a matvec with the subgroup entry point (matvec/reduce_subgroup.wgsl, which records this
// invocation's subgroup in `sg_index`, `sg_lane`, `sg_count`): each subgroup sums with
// subgroupAdd, one lane stores the subgroup's sum, and every invocation adds the sums in
// subgroup order (deterministic). Two barriers, against norm/reduce.wgsl's tree of
// log2(WG) + 2; the same contract: every invocation gets the total, and the barrier after
// the read lets the kernel call it again.

var<workgroup> subgroup_sums: array<f32, 256>;

fn workgroup_sum(v: f32, tid: u32) -> f32 {
    let s = subgroupAdd(v);
    if sg_lane == 0u {
        subgroup_sums[sg_index] = s;
    }
    workgroupBarrier();
    var total = 0.0;
    for (var i = 0u; i < sg_count; i++) {
        total += subgroup_sums[i];
    }
    workgroupBarrier();
    return total;
}
