// Matvec inner loop for F32 rows: 32 weights (8 x 4 words) dotted with x, unrolled by hand so
// every load of the unit is in flight at once. Rows start 4-byte aligned.

fn f32_part(b: u32, i: u32, xb: u32) -> f32 {
    let k = (b >> 2u) + 4u * i;
    let wv = vec4<f32>(bitcast<f32>(w[k]), bitcast<f32>(w[k + 1u]), bitcast<f32>(w[k + 2u]), bitcast<f32>(w[k + 3u]));
    return dot(wv, x4(xb + 4u * i));
}

fn unit_dot(blk: u32, unit: u32, xb: u32) -> f32 {
    return f32_part(blk, 0u, xb) + f32_part(blk, 1u, xb) + f32_part(blk, 2u, xb) + f32_part(blk, 3u, xb)
        + f32_part(blk, 4u, xb) + f32_part(blk, 5u, xb) + f32_part(blk, 6u, xb) + f32_part(blk, 7u, xb);
}
