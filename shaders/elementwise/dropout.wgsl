// LoRA dropout in place: x[offset + i] *= keep_factor(i) (dropout_mask.wgsl).

@group(0) @binding(1) var<storage, read_write> x: array<f32>;

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) tid: u32,
) {
    let i = (wid.y * nwg.x + wid.x) * WG + tid;
    if i >= p.n {
        return;
    }
    x[p.offset + i] = x[p.offset + i] * keep_factor(i);
}
