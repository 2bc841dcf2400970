// Matvec inner loop for Q4_0 (f16 d, 16 bytes of nibbles; low nibbles are weights 0..15, high
// 16..31): d * sum (q - 8) x, the 4 words unrolled.

fn q4_0_part(b: u32, i: u32, xb: u32) -> f32 {
    let q = load_u32(b + 2u + 4u * i);
    return dot(nibbles4(q, 0u) - 8.0, x4(xb + 4u * i)) + dot(nibbles4(q, 4u) - 8.0, x4(xb + 16u + 4u * i));
}

fn unit_dot(blk: u32, unit: u32, xb: u32) -> f32 {
    let s = q4_0_part(blk, 0u, xb) + q4_0_part(blk, 1u, xb) + q4_0_part(blk, 2u, xb) + q4_0_part(blk, 3u, xb);
    return load_f16(blk) * s;
}
