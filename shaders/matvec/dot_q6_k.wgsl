// Matvec inner loop for Q6_K, one unit (32 weights) of a 210-byte super-block: in half n,
// quarter k (unit = 4n + k) the 4-bit part is ql[64n + 32(k%2) + l] >> 4(k/2), the 2-bit part
// qh[32n + l] >> 2k, and weights 0..15 / 16..31 use scales[8n + 2k] / [8n + 2k + 1];
// w = d * scale * (q - 32). The 8 words are unrolled.

fn q6_k_part(ql: u32, qh: u32, shl: u32, shh: u32, i: u32, xb: u32) -> f32 {
    let lo = (load_u32(ql + 4u * i) >> shl) & 0x0f0f0f0fu;
    let hi = (load_u32(qh + 4u * i) >> shh) & 0x03030303u;
    return dot(vec4<f32>(unpack4xU8(lo | (hi << 4u))) - 32.0, x4(xb + 4u * i));
}

fn unit_dot(blk: u32, unit: u32, xb: u32) -> f32 {
    let n = unit >> 2u;
    let k = unit & 3u;
    let ql = blk + 64u * n + 32u * (k & 1u);
    let qh = blk + 128u + 32u * n;
    let shl = 4u * (k >> 1u);
    let shh = 2u * k;
    let sc = blk + 192u + 8u * n + 2u * k;
    let a = q6_k_part(ql, qh, shl, shh, 0u, xb) + q6_k_part(ql, qh, shl, shh, 1u, xb)
        + q6_k_part(ql, qh, shl, shh, 2u, xb) + q6_k_part(ql, qh, shl, shh, 3u, xb);
    let b = q6_k_part(ql, qh, shl, shh, 4u, xb) + q6_k_part(ql, qh, shl, shh, 5u, xb)
        + q6_k_part(ql, qh, shl, shh, 6u, xb) + q6_k_part(ql, qh, shl, shh, 7u, xb);
    let d = load_f16(blk + 208u);
    return d * (f32(sbyte(load_u8(sc), 0u)) * a + f32(sbyte(load_u8(sc + 1u), 0u)) * b);
}
