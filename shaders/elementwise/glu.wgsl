// Gated linear unit: out[i] = act(gate[i]) * up[i], act picked by the ACT override:
// 0 = GELU, tanh form as llama.cpp (GEGLU); 1 = SiLU (SwiGLU). gate and up may be the same
// buffer (the fused gate|up matvec output) at different offsets.

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
override ACT: u32 = 0u;

const SQRT_2_OVER_PI: f32 = 0.7978845608028654;
const GELU_COEF_A: f32 = 0.044715;

fn gelu_tanh(x: f32) -> f32 {
    return 0.5 * x * (1.0 + tanh(SQRT_2_OVER_PI * x * (1.0 + GELU_COEF_A * x * x)));
}

fn silu(x: f32) -> f32 {
    return x / (1.0 + exp(-x));
}

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
    var a: f32;
    if ACT == 0u {
        a = gelu_tanh(g);
    } else {
        a = silu(g);
    }
    out[p.out_offset + i] = a * up[p.up_offset + i];
}
