// Matvec part for Q4_0 (planes: 16 bytes of nibbles per block, then f16 d): one lane per block,
// one vec4 load of its nibbles; d * (sum q x - 8 sum x). Inputs from matvec/x32.wgsl.
const PARTS: u32 = 1u;
const STEP_UNITS: u32 = 1u;

fn part_dot(blk: u32, unit: u32, part: u32, xv: PartX) -> f32 {
    let bi = blk / BLOCK_BYTES;
    let q = w[1u + bi];
    var s = 0.0;
    for (var k = 0u; k < 4u; k++) {
        s += dot(nibbles4(q[k], 0u), xv.lo[k]) + dot(nibbles4(q[k], 4u), xv.hi[k]);
    }
    return plane_f16(1u, bi) * (s - 8.0 * xv.sum);
}
