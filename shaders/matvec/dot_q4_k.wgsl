// Matvec inner loop for Q4_K, one unit (sub-block of 32) of a 144-byte super-block: 6-bit scale
// and min from the packed 12 bytes, then d*sc * sum q x - dmin*m * sum x over 8 words of
// nibbles (low nibbles for even units, high for odd), unrolled.

fn q4_k_part(qs: u32, shift: u32, i: u32, xb: u32) -> vec2<f32> {
    let xv = x4(xb + 4u * i);
    return vec2<f32>(dot(nibbles4(load_u32(qs + 4u * i), shift), xv), dot(xv, vec4<f32>(1.0)));
}

fn unit_dot(blk: u32, unit: u32, xb: u32) -> f32 {
    let d = load_f16(blk);
    let dmin = load_f16(blk + 2u);
    let s = blk + 4u;
    var sc: u32;
    var m: u32;
    if unit < 4u {
        sc = load_u8(s + unit) & 63u;
        m = load_u8(s + unit + 4u) & 63u;
    } else {
        sc = (load_u8(s + unit + 4u) & 0xfu) | ((load_u8(s + unit - 4u) >> 6u) << 4u);
        m = (load_u8(s + unit + 4u) >> 4u) | ((load_u8(s + unit) >> 6u) << 4u);
    }
    let qs = blk + 16u + 32u * (unit >> 1u);
    let sh = 4u * (unit & 1u);
    let t = q4_k_part(qs, sh, 0u, xb) + q4_k_part(qs, sh, 1u, xb) + q4_k_part(qs, sh, 2u, xb)
        + q4_k_part(qs, sh, 3u, xb) + q4_k_part(qs, sh, 4u, xb) + q4_k_part(qs, sh, 5u, xb)
        + q4_k_part(qs, sh, 6u, xb) + q4_k_part(qs, sh, 7u, xb);
    return d * f32(sc) * t.x - dmin * f32(m) * t.y;
}
