// In-place map x[offset + i] = f(x[offset + i]) for i < n. OP = 0: scale, x * value.
// OP = 1: logit soft-cap, value * tanh(x / value).

struct Params {
    n: u32,
    offset: u32,
    value: f32,
    _pad0: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> x: array<f32>;

override WG: u32 = 256u;
override OP: u32 = 0u;

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
    let v = x[p.offset + i];
    if OP == 0u {
        x[p.offset + i] = v * p.value;
    } else {
        x[p.offset + i] = p.value * tanh(v / p.value);
    }
}
