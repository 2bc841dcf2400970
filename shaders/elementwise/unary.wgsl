// In-place map x[offset + i] = unary_map(x[offset + i]) for i < n (unary_map.wgsl).

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
    x[p.offset + i] = unary_map(x[p.offset + i]);
}
