// Gated linear unit: out[i] = act(gate[i]) * up[i], act from elementwise/act.wgsl (the ACT
// override). gate and up may be the same buffer (the fused gate|up matvec output) at
// different offsets.

struct Params {
    n: u32,
    gate_offset: u32,
    up_offset: u32,
    out_offset: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> gate: array<f32>;
@group(0) @binding(2) var<storage, read> up: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

override WG: u32 = 256u;

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
    out[p.out_offset + i] = act(gate[p.gate_offset + i]) * up[p.up_offset + i];
}
