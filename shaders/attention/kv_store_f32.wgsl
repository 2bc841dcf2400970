// KV cache in f32: one pair of values per vec2 element. The including kernel binds the
// caches `kc` and `vc` as array<KvWord> at its own binding numbers (kv_append,
// head_norm_rope's cache variant).

alias KvWord = vec2<f32>;

fn store_k(i: u32, x: vec2<f32>) {
    kc[i] = x;
}

fn store_v(i: u32, x: vec2<f32>) {
    vc[i] = x;
}
