// Reading an f32 KV cache: pair i of the flattened [n_kv_heads, max_len, head_dim] caches.

@group(0) @binding(2) var<storage, read> kc: array<vec2<f32>>;
@group(0) @binding(3) var<storage, read> vc: array<vec2<f32>>;

fn load_k(i: u32) -> vec2<f32> {
    return kc[i];
}

fn load_v(i: u32) -> vec2<f32> {
    return vc[i];
}
