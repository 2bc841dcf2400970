// The integer sums that Q4_0's and Q4_1's q8-input parts share (matvec/dot8_q4_0.wgsl,
// dot8_q4_1.wgsl): both keep a block's 32 nibbles as one vec4 of plane 0 and give each block
// one lane (dot_q4_0.wgsl's layout). Over both input digits (`dot8`, matvec/x_q8.wgsl), exact
// in i32: `q`, each row's sum of nibble * input over the block, and `x`, the block's sum of
// inputs (a dot with bytes of 1) for the row-independent offset (Q4_0) or min (Q4_1).

struct NibbleSums {
    q: vec4<i32>,
    x: i32,
}

// The sums of blocks `bi` of the 4 rows against the inputs from `xb`.
fn nibble_sums(bi: vec4<u32>, xb: u32) -> NibbleSums {
    let q0 = w[1u + bi.x];
    let q1 = w[1u + bi.y];
    let q2 = w[1u + bi.z];
    let q3 = w[1u + bi.w];
    let xl = xq16(xb);
    let xh = xq16(xb + 16u);
    let yl = xq16_lo(xb);
    let yh = xq16_lo(xb + 16u);
    var s = NibbleSums(vec4<i32>(0), 0);
    for (var k = 0u; k < 4u; k++) {
        s.x += dot8(0x01010101u, xl[k], yl[k]) + dot8(0x01010101u, xh[k], yh[k]);
        s.q += vec4<i32>(
            nibble_dot8(q0[k], xl[k], yl[k], xh[k], yh[k]),
            nibble_dot8(q1[k], xl[k], yl[k], xh[k], yh[k]),
            nibble_dot8(q2[k], xl[k], yl[k], xh[k], yh[k]),
            nibble_dot8(q3[k], xl[k], yl[k], xh[k], yh[k]),
        );
    }
    return s;
}
