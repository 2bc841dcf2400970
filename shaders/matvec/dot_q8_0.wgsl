// Matvec inner loop for Q8_0 (f16 d, 32 x int8): d * sum q x, the 8 words unrolled.

fn q8_0_part(b: u32, i: u32, xb: u32) -> f32 {
    return dot(vec4<f32>(unpack4xI8(load_u32(b + 2u + 4u * i))), x4(xb + 4u * i));
}

fn unit_dot(blk: u32, unit: u32, xb: u32) -> f32 {
    let s = q8_0_part(blk, 0u, xb) + q8_0_part(blk, 1u, xb) + q8_0_part(blk, 2u, xb) + q8_0_part(blk, 3u, xb)
        + q8_0_part(blk, 4u, xb) + q8_0_part(blk, 5u, xb) + q8_0_part(blk, 6u, xb) + q8_0_part(blk, 7u, xb);
    return load_f16(blk) * s;
}
