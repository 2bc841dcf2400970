// Storing into an f16 KV cache: one pair of values per u32 word (pack2x16float: no
// SHADER_F16 needed). The including kernel binds the caches `kc` and `vc` as read-write
// array<KvWord> (KvWord: kv_load_f16.wgsl) at its own binding numbers (kv_append,
// head_norm_rope's cache variant, the rotating decode attention).

// The word that holds pair x.
fn kv_word(x: vec2<f32>) -> KvWord {
    return pack2x16float(x);
}

fn store_k(i: u32, x: vec2<f32>) {
    kc[i] = kv_word(x);
}

fn store_v(i: u32, x: vec2<f32>) {
    vc[i] = kv_word(x);
}
