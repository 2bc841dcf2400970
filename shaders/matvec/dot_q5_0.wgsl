// Matvec part for Q5_0 (planes: 16 bytes of nibbles per block, qh, f16 d): one lane per block,
// one vec4 load of its nibbles; d * sum (q - 16) x with the helpers of formats/q5_0.wgsl.
const PARTS: u32 = 1u;
const STEP_UNITS: u32 = 1u;

fn part_dot(blk: u32, unit: u32, part: u32, xb: u32) -> f32 {
    let bi = blk / BLOCK_BYTES;
    let q = w[1u + bi];
    let qh = plane_u32(1u, bi);
    var s = 0.0;
    for (var k = 0u; k < 4u; k++) {
        s += dot(q5_0_lo(q, qh, k), x4(xb + 4u * k)) + dot(q5_0_hi(q, qh, k), x4(xb + 16u + 4u * k));
    }
    return plane_f16(2u, bi) * s;
}
