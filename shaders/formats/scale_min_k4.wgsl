// Q4_K's and Q5_K's 12 packed bytes of eight 6-bit scales and eight 6-bit mins (GGML's
// get_scale_min_k4): units 0..3 keep theirs in the low 6 bits of bytes u and u + 4; units 4..7
// take their low 4 bits from byte u + 4 and their top 2 bits from the spare top bits of bytes
// u - 4 (scale) and u (min). One copy, included before either format's decoder.

// (scale, min) of unit `unit` (0..7), from the 12 packed bytes as three words. Branch-free:
// neighbouring lanes of a matvec take units below and above 4, and a branch would run both.
fn scale_min_k4_words(s: vec3<u32>, unit: u32) -> vec2<f32> {
    let k = unit & 3u;
    let hi = unit >> 2u;
    let b_u = ubyte(s[hi], k); // byte u
    let b_u4 = ubyte(s[hi + 1u], k); // byte u + 4
    let b_low = ubyte(s.x, k); // byte u - 4, for u >= 4
    let sc = select((b_u4 & 0xfu) | ((b_low >> 6u) << 4u), b_u & 63u, unit < 4u);
    let m = select((b_u4 >> 4u) | ((b_u >> 6u) << 4u), b_u4 & 63u, unit < 4u);
    return vec2<f32>(f32(sc), f32(m));
}

// (scale, min) of unit `unit` (0..7), from the 12 packed bytes at byte offset `s`.
fn scale_min_k4(s: u32, unit: u32) -> vec2<f32> {
    return scale_min_k4_words(vec3<u32>(load_u32(s), load_u32(s + 4u), load_u32(s + 8u)), unit);
}
