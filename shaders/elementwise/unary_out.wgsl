// Out-of-place map y[y_offset + i] = unary_map(x[offset + i]) for i < n (unary_map.wgsl): one
// dispatch where a copy and the in-place map made two (an input that lives on).

@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;

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
    y[p.y_offset + i] = unary_map(x[p.offset + i]);
}
