// The scaled input's sum of partial sums (matvec/x_scaled.wgsl) without subgroup operations:
// invocation tid takes tid, tid + WG, .., and the workgroup adds them (norm/reduce.wgsl).

fn sum_lane(tid: u32) -> u32 {
    return tid;
}

fn sum_stride() -> u32 {
    return WG;
}

fn scaled_total(s: f32, tid: u32) -> f32 {
    return workgroup_sum(s, tid);
}
