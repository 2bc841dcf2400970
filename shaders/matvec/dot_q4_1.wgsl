// Matvec inner loop for Q4_1 (f16 d, f16 m, 16 bytes of nibbles): d * sum q x + m * sum x,
// the 4 words unrolled.

fn q4_1_part(b: u32, i: u32, xb: u32) -> vec2<f32> {
    let q = load_u32(b + 4u + 4u * i);
    let xl = x4(xb + 4u * i);
    let xh = x4(xb + 16u + 4u * i);
    return vec2<f32>(dot(nibbles4(q, 0u), xl) + dot(nibbles4(q, 4u), xh), dot(xl + xh, vec4<f32>(1.0)));
}

fn unit_dot(blk: u32, unit: u32, xb: u32) -> f32 {
    let s = q4_1_part(blk, 0u, xb) + q4_1_part(blk, 1u, xb) + q4_1_part(blk, 2u, xb) + q4_1_part(blk, 3u, xb);
    return load_f16(blk) * s.x + load_f16(blk + 2u) * s.y;
}
