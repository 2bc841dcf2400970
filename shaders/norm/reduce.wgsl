// Workgroup sum for the norm kernels (rms_norm, residual_norm, head_norm_rope): a tree over
// WG slots of workgroup memory (WG, a power of two <= 256, is the including file's override).
// Every invocation gets the total; the barrier after the read lets a kernel call it again.

var<workgroup> partial: array<f32, 256>;

fn workgroup_sum(v: f32, tid: u32) -> f32 {
    partial[tid] = v;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        if tid < s {
            partial[tid] += partial[tid + s];
        }
        workgroupBarrier();
    }
    let total = partial[0];
    workgroupBarrier();
    return total;
}
