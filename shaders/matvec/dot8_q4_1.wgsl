// Matvec part for Q4_1 with an int8 input (matvec/x_q8.wgsl): the lane layout and loads of
// dot_q4_1.wgsl (one lane per block, one vec4 of nibbles per row). Integer sums sum q x and
// sum x (a dot with bytes of 1), exact; then d_x (d sum q x + m sum x).
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
    var s = vec4<i32>(0);
    var sx = 0;
    for (var k = 0u; k < 4u; k++) {
        sx += dot4I8Packed(0x01010101u, xl[k]) + dot4I8Packed(0x01010101u, xh[k]);
        s += vec4<i32>(
            nibble_dot8(q0[k], xl[k], xh[k]),
            nibble_dot8(q1[k], xl[k], xh[k]),
            nibble_dot8(q2[k], xl[k], xh[k]),
            nibble_dot8(q3[k], xl[k], xh[k]),
        );
    }
    let m0 = unpack2x16float(plane_u32(1u, bi.x));
    let m1 = unpack2x16float(plane_u32(1u, bi.y));
    let m2 = unpack2x16float(plane_u32(1u, bi.z));
    let m3 = unpack2x16float(plane_u32(1u, bi.w));
    let d = vec4<f32>(m0.x, m1.x, m2.x, m3.x);
    let m = vec4<f32>(m0.y, m1.y, m2.y, m3.y);
    return xd(xb) * (d * vec4<f32>(s) + m * f32(sx));
}
