// An f32 KV cache: one pair of values per vec2 element (the word type `KvWord`, which every
// kernel over a cache includes this file for), and a word's pair of values. The including
// kernel binds the caches `kc` and `vc` as array<KvWord> (read-only, or read-write where it
// also stores).

alias KvWord = vec2<f32>;

// A word's pair of values.
fn kv_pair(w: KvWord) -> vec2<f32> {
    return w;
}
