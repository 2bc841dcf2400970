// Q4_K's and Q5_K's eight 6-bit scales sc[u] and eight 6-bit mins m[u] (block bytes 4..16, the
// three words after d and dmin), as the GPU holds them: regrouped at upload
// (`layout::regroup_scales_k4` in Rust) from GGML's packing (get_scale_min_k4) so that the
// four values of the unit pair (2g, 2g + 1) sit in byte g of each word:
//   word 0, byte g: sc[2g] & 15 | (sc[2g + 1] & 15) << 4
//   word 1, byte g: m[2g] & 15 | (m[2g + 1] & 15) << 4
//   word 2, byte g: sc[2g] >> 4 | (sc[2g + 1] >> 4) << 2 | (m[2g] >> 4) << 4 | (m[2g + 1] >> 4) << 6
// A matvec lane takes a unit pair and decodes its four values with a few shifts and masks;
// GGML's packing needed two branch-free decodes of a dozen operations each (docs/PERF.md,
// D-q4k-regroup: 4096x14336 Q4_K 56.0% -> 63.1% of 2.18 TB/s).
// One copy, included before either format's decoder.

// (sc[2g], sc[2g + 1], m[2g], m[2g + 1]) from the three scale words `s`.
fn scales_k4_pair(s: vec3<u32>, g: u32) -> vec4<f32> {
    let b = (s >> vec3<u32>(8u * g)) & vec3<u32>(0xffu);
    let low = vec4<u32>(b.x & 15u, b.x >> 4u, b.y & 15u, b.y >> 4u);
    let high = (vec4<u32>(b.z) >> vec4<u32>(0u, 2u, 4u, 6u)) & vec4<u32>(3u);
    return vec4<f32>(low | (high << vec4<u32>(4u)));
}

// (sc[unit], m[unit]) from the three scale words `s`: its pair's, picked without a branch
// (neighbouring lanes of a kernel take different units).
fn scale_min_k4_words(s: vec3<u32>, unit: u32) -> vec2<f32> {
    let v = scales_k4_pair(s, unit >> 1u);
    return select(v.xz, v.yw, (unit & 1u) == 1u);
}

// The three scale words at byte offset `s` (any alignment).
fn scales_k4_words_at(s: u32) -> vec3<u32> {
    return vec3<u32>(load_u32(s), load_u32(s + 4u), load_u32(s + 8u));
}

// (sc[unit], m[unit]) from the 12 scale bytes at byte offset `s`.
fn scale_min_k4(s: u32, unit: u32) -> vec2<f32> {
    return scale_min_k4_words(scales_k4_words_at(s), unit);
}
