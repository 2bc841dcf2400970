// An f16 KV cache: one pair of values per u32 word (the word type `KvWord`, which every kernel
// over a cache includes this file for), and a word's pair of values (unpack2x16float: no SHADER_F16).
// The including kernel binds the caches `kc` and `vc` as array<KvWord> (read-only, or
// read-write where it also stores).

alias KvWord = u32;

// A word's pair of values.
fn kv_pair(w: KvWord) -> vec2<f32> {
    return unpack2x16float(w);
}
