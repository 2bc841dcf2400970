// dst[dst_offset + i] = src[src_offset + i] for i < n (f32 or u32 alike: words are copied).

struct Params {
    n: u32,
    dst_offset: u32,
    src_offset: u32,
    _pad0: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> src: array<u32>;
@group(0) @binding(2) var<storage, read_write> dst: array<u32>;

override WG: u32 = 256u;

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) tid: u32,
) {
    let i = (wid.y * nwg.x + wid.x) * WG + tid;
    if i < p.n {
        dst[p.dst_offset + i] = src[p.src_offset + i];
    }
}
