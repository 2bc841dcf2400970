// Backward of the gated linear unit out = act(gate) * up (elementwise/glu.wgsl): given dy =
// dL/dout, dgate[i] = dy[i] * up[i] * act'(gate[i]) and dup[i] = dy[i] * act(gate[i]), with act
// and act' from elementwise/act.wgsl and elementwise/act_grad.wgsl (the ACT override). gate and
// up may be one buffer (the fused gate|up product) and so may dgate and dup (the gradient of
// that product's output), each at its own offset.

struct Params {
    n: u32,
    gate_offset: u32,
    up_offset: u32,
    dy_offset: u32,
    dgate_offset: u32,
    dup_offset: u32,
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> gate: array<f32>;
@group(0) @binding(2) var<storage, read> up: array<f32>;
@group(0) @binding(3) var<storage, read> dy: array<f32>;
@group(0) @binding(4) var<storage, read_write> dgate: array<f32>;
@group(0) @binding(5) var<storage, read_write> dup: array<f32>;

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
    let g = gate[p.gate_offset + i];
    let u = up[p.up_offset + i];
    let d = dy[p.dy_offset + i];
    dgate[p.dgate_offset + i] = d * u * act_grad(g);
    dup[p.dup_offset + i] = d * act(g);
}
