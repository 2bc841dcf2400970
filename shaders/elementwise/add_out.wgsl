// out[out_offset + i] = a[a_offset + i] + b[b_offset + i] for i < n: an add whose inputs both
// live on (the training step's Add node where neither input dies there, a gradient summed from
// two shared ones), one dispatch and one write instead of a copy and an in-place add. One f32
// addition: the same value as `copy` then `add`, bit for bit.

struct Params {
    n: u32,
    out_offset: u32,
    a_offset: u32,
    b_offset: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> a: array<f32>;
@group(0) @binding(2) var<storage, read> b: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

override WG: u32 = 256u;

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) tid: u32,
) {
    let i = (wid.y * nwg.x + wid.x) * WG + tid;
    if i < p.n {
        out[p.out_offset + i] = a[p.a_offset + i] + b[p.b_offset + i];
    }
}
