// The scaled input's sum of partial sums (matvec/x_scaled.wgsl) in the subgroup program: every
// subgroup adds all of them itself (lane l takes l, l + size, ..), so no subgroup waits for
// another. Subgroups of one size add in the same order, so the rows agree bit for bit; a
// partial last subgroup may round differently (within the check's bound, which holds for any
// order).

fn sum_lane(tid: u32) -> u32 {
    return sg_lane;
}

fn sum_stride() -> u32 {
    return sg_size;
}

fn scaled_total(s: f32, tid: u32) -> f32 {
    return subgroupAdd(s);
}
