// The unary kernels' map, shared by the in-place (unary.wgsl) and the out-of-place
// (unary_out.wgsl) entry: OP = 0: scale, x * value. OP = 1: logit soft-cap,
// value * tanh(x / value). `y_offset` is the out-of-place output's; the in-place one ignores it.

struct Params {
    n: u32,
    offset: u32,
    value: f32,
    y_offset: u32,
}

@group(0) @binding(0) var<uniform> p: Params;

override WG: u32 = 256u;
override OP: u32 = 0u;

fn unary_map(v: f32) -> f32 {
    if OP == 0u {
        return v * p.value;
    }
    return p.value * tanh(v / p.value);
}
