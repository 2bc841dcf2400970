// KV cache in f32: one pair of values per vec2 element.

@group(0) @binding(4) var<storage, read_write> kc: array<vec2<f32>>;
@group(0) @binding(5) var<storage, read_write> vc: array<vec2<f32>>;

fn store_k(i: u32, x: vec2<f32>) {
    kc[i] = x;
}

fn store_v(i: u32, x: vec2<f32>) {
    vc[i] = x;
}
