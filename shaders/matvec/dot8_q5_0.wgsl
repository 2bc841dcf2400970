// Matvec part for Q5_0 with a q8 input (matvec/x_q8.wgsl): the lane layout and loads of
// dot_q5_0.wgsl (one lane per block, one vec4 of nibbles per row, codes from
// formats/q5_codes.wgsl). Integer sums over both input digits (`dot8`): sum q x (codes
// 0..31) and sum x, so sum (q - 16) x = sum q x - 16 sum x is exact (and below 2^24: exact
// in f32 too); d_w * d_x / 254 after.
const PARTS: u32 = 1u;
const SLICE_UNITS: u32 = 1u;

// Row `q`'s codes k (word k of nibbles with its fifth bits) dotted with the inputs' digits:
// inputs 4k .. 4k + 3 (`l1`, `l2`) and 16 + 4k .. 16 + 4k + 3 (`h1`, `h2`).
fn q5_0_dot8(q: vec4<u32>, qh: u32, k: u32, l1: u32, l2: u32, h1: u32, h2: u32) -> i32 {
    let c = q5_codes(q[k], qh, k);
    return dot8(c.x, l1, l2) + dot8(c.y, h1, h2);
}

fn rows_dot4(blk: vec4<u32>, unit: u32, part: u32, xb: u32) -> vec4<f32> {
    let bi = blk / BLOCK_BYTES;
    let q0 = w[1u + bi.x];
    let q1 = w[1u + bi.y];
    let q2 = w[1u + bi.z];
    let q3 = w[1u + bi.w];
    let qh = vec4<u32>(plane_u32(1u, bi.x), plane_u32(1u, bi.y), plane_u32(1u, bi.z), plane_u32(1u, bi.w));
    let xl = xq16(xb);
    let xh = xq16(xb + 16u);
    let yl = xq16_lo(xb);
    let yh = xq16_lo(xb + 16u);
    var s = vec4<i32>(0);
    var sx = 0;
    for (var k = 0u; k < 4u; k++) {
        sx += dot8(0x01010101u, xl[k], yl[k]) + dot8(0x01010101u, xh[k], yh[k]);
        s += vec4<i32>(
            q5_0_dot8(q0, qh.x, k, xl[k], yl[k], xh[k], yh[k]),
            q5_0_dot8(q1, qh.y, k, xl[k], yl[k], xh[k], yh[k]),
            q5_0_dot8(q2, qh.z, k, xl[k], yl[k], xh[k], yh[k]),
            q5_0_dot8(q3, qh.w, k, xl[k], yl[k], xh[k], yh[k]),
        );
    }
    let d = vec4<f32>(plane_f16(2u, bi.x), plane_f16(2u, bi.y), plane_f16(2u, bi.z), plane_f16(2u, bi.w));
    return d * (xd(xb) * vec4<f32>(s - vec4<i32>(16 * sx)));
}
