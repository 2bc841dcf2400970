// Matvec part for Q5_0 (planes: 16 bytes of nibbles per block, qh, f16 d): one lane per block,
// one vec4 load of its nibbles; d * (sum q x - 16 sum x), codes from formats/q5_codes.wgsl and
// inputs from matvec/x32.wgsl.
const PARTS: u32 = 1u;
const STEP_UNITS: u32 = 1u;

fn part_dot(blk: u32, unit: u32, part: u32, xv: PartX) -> f32 {
    let bi = blk / BLOCK_BYTES;
    let q = w[1u + bi];
    let qh = plane_u32(1u, bi);
    var s = 0.0;
    for (var k = 0u; k < 4u; k++) {
        let c = q5_codes(q[k], qh, k);
        s += dot(vec4<f32>(unpack4xU8(c.x)), xv.lo[k]) + dot(vec4<f32>(unpack4xU8(c.y)), xv.hi[k]);
    }
    return plane_f16(2u, bi) * (s - 16.0 * xv.sum);
}
