// Workgroup sum for the norm kernels (rms_norm, residual_norm, head_norm_rope) and the plain
// matvec's norm input: a tree over WG slots of workgroup memory (WG <= 256, the including
// file's override; a power of two but for a matvec's quads, so the tree's first stride is the
// largest power of two below WG and its adds check the far slot). Every invocation gets the
// total; the barrier after the read lets a kernel call it again.

var<workgroup> partial: array<f32, 256>;

fn workgroup_sum(v: f32, tid: u32) -> f32 {
    partial[tid] = v;
    workgroupBarrier();
    for (var s = 1u << (31u - countLeadingZeros(WG - 1u)); s > 0u; s >>= 1u) {
        if tid < s && tid + s < WG {
            partial[tid] += partial[tid + s];
        }
        workgroupBarrier();
    }
    let total = partial[0];
    workgroupBarrier();
    return total;
}
