// Q4_K's and Q5_K's 12 packed bytes of eight 6-bit scales and eight 6-bit mins (GGML's
// get_scale_min_k4): units 0..3 keep theirs in the low 6 bits of bytes u and u + 4; units 4..7
// take their low 4 bits from byte u + 4 and their top 2 bits from the spare top bits of bytes
// u - 4 (scale) and u (min). One copy, included before either format's decoder.

// (scale, min) of unit `unit` (0..7), from the 12 packed bytes as three words.
fn scale_min_k4_words(s: vec3<u32>, unit: u32) -> vec2<f32> {
    let b = vec4<u32>(
        ubyte(s[unit >> 2u], unit & 3u),
        ubyte(s[(unit + 4u) >> 2u], unit & 3u),
        ubyte(s[(unit - 4u) >> 2u], unit & 3u),
        0u,
    );
    // b.x = byte u, b.y = byte u + 4, b.z = byte u - 4 (only read when u >= 4).
    if unit < 4u {
        return vec2<f32>(f32(b.x & 63u), f32(b.y & 63u));
    }
    let sc = (b.y & 0xfu) | ((b.z >> 6u) << 4u);
    let m = (b.y >> 4u) | ((b.x >> 6u) << 4u);
    return vec2<f32>(f32(sc), f32(m));
}

// (scale, min) of unit `unit` (0..7), from the 12 packed bytes at byte offset `s`.
fn scale_min_k4(s: u32, unit: u32) -> vec2<f32> {
    return scale_min_k4_words(vec3<u32>(load_u32(s), load_u32(s + 4u), load_u32(s + 8u)), unit);
}
