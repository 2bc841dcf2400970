// Matvec part for Q8_0 with a q8 input (matvec/x_q8.wgsl): the lane layout and loads of
// dot_q8_0.wgsl (2 lanes per block, one vec4 of q each), the 16 products with both input
// digits summed exactly as integers (`dot8`) and scaled once by the weight's d and the input
// block's d / 254. The only format whose sums may pass 2^24 (16 * 128 * 32385), so the
// conversion to f32 may round: 2^-24 relative, within the matvec's bound.
const PARTS: u32 = 2u;
const SLICE_UNITS: u32 = 1u;

fn rows_dot4(blk: vec4<u32>, unit: u32, part: u32, xb: u32) -> vec4<f32> {
    let bi = blk / BLOCK_BYTES;
    let q0 = w[1u + 2u * bi.x + part];
    let q1 = w[1u + 2u * bi.y + part];
    let q2 = w[1u + 2u * bi.z + part];
    let q3 = w[1u + 2u * bi.w + part];
    let xo = xb + 16u * part;
    let x1 = xq16(xo);
    let x2 = xq16_lo(xo);
    var s = vec4<i32>(0);
    for (var c = 0u; c < 4u; c++) {
        s += vec4<i32>(
            dot8(q0[c], x1[c], x2[c]),
            dot8(q1[c], x1[c], x2[c]),
            dot8(q2[c], x1[c], x2[c]),
            dot8(q3[c], x1[c], x2[c]),
        );
    }
    let d = vec4<f32>(plane_f16(1u, bi.x), plane_f16(1u, bi.y), plane_f16(1u, bi.z), plane_f16(1u, bi.w));
    return d * (xd(xo) * vec4<f32>(s));
}
