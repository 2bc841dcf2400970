// Matvec part for Q4_0 with a q8 input (matvec/x_q8.wgsl): the lane layout and loads of
// dot_q4_0.wgsl (one lane per block, one vec4 of nibbles per row), the integer sums of
// matvec/dot8_nibbles.wgsl: sum q x over the nibbles (0..15: valid int8 operands of
// dot4I8Packed) and sum x, so sum (q - 8) x = sum q x - 8 sum x is exact (and below 2^24:
// exact in f32 too); d_w * d_x / 254 after.
const PARTS: u32 = 1u;
const SLICE_UNITS: u32 = 1u;

fn rows_dot4(blk: vec4<u32>, unit: u32, part: u32, xb: u32) -> vec4<f32> {
    let bi = blk / BLOCK_BYTES;
    let s = nibble_sums(bi, xb);
    let d = vec4<f32>(plane_f16(1u, bi.x), plane_f16(1u, bi.y), plane_f16(1u, bi.z), plane_f16(1u, bi.w));
    return d * (xd(xb) * vec4<f32>(s.q - vec4<i32>(8 * s.x)));
}
