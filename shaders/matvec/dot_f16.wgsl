// Matvec inner loop for F16 rows: 32 weights (16 words of two f16) dotted with x, unrolled.
// Rows start at even byte offsets (load_u32 handles the 2-byte misalignment).

fn f16_part(b: u32, i: u32, xb: u32) -> f32 {
    let lo = unpack2x16float(load_u32(b + 8u * i));
    let hi = unpack2x16float(load_u32(b + 8u * i + 4u));
    return dot(vec4<f32>(lo, hi), x4(xb + 4u * i));
}

fn unit_dot(blk: u32, unit: u32, xb: u32) -> f32 {
    return f16_part(blk, 0u, xb) + f16_part(blk, 1u, xb) + f16_part(blk, 2u, xb) + f16_part(blk, 3u, xb)
        + f16_part(blk, 4u, xb) + f16_part(blk, 5u, xb) + f16_part(blk, 6u, xb) + f16_part(blk, 7u, xb);
}
