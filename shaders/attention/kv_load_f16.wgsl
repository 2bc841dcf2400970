// Reading an f16 KV cache: pair i is one u32 word of two f16 (unpack2x16float: no SHADER_F16).

@group(0) @binding(2) var<storage, read> kc: array<u32>;
@group(0) @binding(3) var<storage, read> vc: array<u32>;

fn load_k(i: u32) -> vec2<f32> {
    return unpack2x16float(kc[i]);
}

fn load_v(i: u32) -> vec2<f32> {
    return unpack2x16float(vc[i]);
}
