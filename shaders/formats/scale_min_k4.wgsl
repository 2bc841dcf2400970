// Q4_K's and Q5_K's 12 packed bytes of eight 6-bit scales and eight 6-bit mins (GGML's
// get_scale_min_k4): units 0..3 keep theirs in the low 6 bits of bytes u and u + 4; units 4..7
// take their low 4 bits from byte u + 4 and their top 2 bits from the spare top bits of bytes
// u - 4 (scale) and u (min). One copy, included before either format's decoder.

// (scale, min) of unit `unit` (0..7), from the 12 packed bytes at byte offset `s`.
fn scale_min_k4(s: u32, unit: u32) -> vec2<f32> {
    var sc: u32;
    var m: u32;
    if unit < 4u {
        sc = load_u8(s + unit) & 63u;
        m = load_u8(s + unit + 4u) & 63u;
    } else {
        sc = (load_u8(s + unit + 4u) & 0xfu) | ((load_u8(s + unit - 4u) >> 6u) << 4u);
        m = (load_u8(s + unit + 4u) >> 4u) | ((load_u8(s + unit) >> 6u) << 4u);
    }
    return vec2<f32>(f32(sc), f32(m));
}
