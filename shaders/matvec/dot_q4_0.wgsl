// Matvec part for Q4_0 (planes: 16 bytes of nibbles per block, then f16 d): one lane per block,
// one vec4 load of its nibbles; d * sum (q - 8) x.
const PARTS: u32 = 1u;
const STEP_UNITS: u32 = 1u;

fn part_dot(blk: u32, unit: u32, part: u32, xb: u32) -> f32 {
    let bi = blk / BLOCK_BYTES;
    let q = w[1u + bi];
    var s = 0.0;
    for (var k = 0u; k < 4u; k++) {
        s += dot(nibbles4(q[k], 0u) - 8.0, x4(xb + 4u * k)) + dot(nibbles4(q[k], 4u) - 8.0, x4(xb + 16u + 4u * k));
    }
    return plane_f16(1u, bi) * s;
}
