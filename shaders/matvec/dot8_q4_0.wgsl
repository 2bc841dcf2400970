// Matvec part for Q4_0 with a q8 input (matvec/x_q8.wgsl): the lane layout and loads of
// dot_q4_0.wgsl (one lane per block, one vec4 of nibbles per row). Integer sums over both
// input digits (`dot8`): sum q x over the nibbles (0..15: valid int8 operands of
// dot4I8Packed) and sum x of the block (a dot with bytes of 1), so sum (q - 8) x =
// sum q x - 8 sum x is exact (and below 2^24: exact in f32 too); d_w * d_x / 254 after.
const PARTS: u32 = 1u;
const STEP_UNITS: u32 = 1u;

fn rows_dot4(blk: vec4<u32>, unit: u32, part: u32, xb: u32) -> vec4<f32> {
    let bi = blk / BLOCK_BYTES;
    let q0 = w[1u + bi.x];
    let q1 = w[1u + bi.y];
    let q2 = w[1u + bi.z];
    let q3 = w[1u + bi.w];
    let xl = xq16(xb);
    let xh = xq16(xb + 16u);
    let yl = xq16_lo(xb);
    let yh = xq16_lo(xb + 16u);
    var s = vec4<i32>(0);
    var sx = 0;
    for (var k = 0u; k < 4u; k++) {
        sx += dot8(0x01010101u, xl[k], yl[k]) + dot8(0x01010101u, xh[k], yh[k]);
        s += vec4<i32>(
            nibble_dot8(q0[k], xl[k], yl[k], xh[k], yh[k]),
            nibble_dot8(q1[k], xl[k], yl[k], xh[k], yh[k]),
            nibble_dot8(q2[k], xl[k], yl[k], xh[k], yh[k]),
            nibble_dot8(q3[k], xl[k], yl[k], xh[k], yh[k]),
        );
    }
    let d = vec4<f32>(plane_f16(1u, bi.x), plane_f16(1u, bi.y), plane_f16(1u, bi.z), plane_f16(1u, bi.w));
    return d * (xd(xb) * vec4<f32>(s - vec4<i32>(8 * sx)));
}
