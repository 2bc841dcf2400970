// An f32 KV cache: one pair of values per vec2 element (the word type `KvWord`, which every
// kernel over a cache includes this file for), and reading pair i of the flattened
// [n_kv_heads, max_len, head_dim] caches. The including kernel binds the caches `kc` and `vc`
// as array<KvWord> (read-only, or read-write where it also stores).

alias KvWord = vec2<f32>;

// A word's pair of values.
fn kv_pair(w: KvWord) -> vec2<f32> {
    return w;
}

fn load_k(i: u32) -> vec2<f32> {
    return kv_pair(kc[i]);
}
