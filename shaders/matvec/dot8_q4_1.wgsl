// Matvec part for Q4_1 with a q8 input (matvec/x_q8.wgsl): the lane layout and loads of
// dot_q4_1.wgsl (one lane per block, one vec4 of nibbles per row), the integer sums of
// matvec/dot8_nibbles.wgsl: sum q x and sum x, exact (and below 2^24: exact in f32 too);
// then d_x / 254 (d sum q x + m sum x).
const PARTS: u32 = 1u;
const SLICE_UNITS: u32 = 1u;

fn rows_dot4(blk: vec4<u32>, unit: u32, part: u32, xb: u32) -> vec4<f32> {
    let bi = blk / BLOCK_BYTES;
    let s = nibble_sums(bi, xb);
    let m0 = unpack2x16float(plane_u32(1u, bi.x));
    let m1 = unpack2x16float(plane_u32(1u, bi.y));
    let m2 = unpack2x16float(plane_u32(1u, bi.z));
    let m3 = unpack2x16float(plane_u32(1u, bi.w));
    let d = vec4<f32>(m0.x, m1.x, m2.x, m3.x);
    let m = vec4<f32>(m0.y, m1.y, m2.y, m3.y);
    return xd(xb) * (d * vec4<f32>(s.q) + m * f32(s.x));
}
