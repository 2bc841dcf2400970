// Matvec part for Q4_1 (planes: 16 bytes of nibbles per block, then the (d, m) word): one lane
// per block, one vec4 load of its nibbles; d * sum q x + m * sum x.
const PARTS: u32 = 1u;
const STEP_UNITS: u32 = 1u;

fn part_dot(blk: u32, unit: u32, part: u32, xb: u32) -> f32 {
    let bi = blk / BLOCK_BYTES;
    let q = w[1u + bi];
    let one = vec4<f32>(1.0);
    var qx = 0.0;
    var sx = 0.0;
    for (var k = 0u; k < 4u; k++) {
        let xa = x4(xb + 4u * k);
        let xc = x4(xb + 16u + 4u * k);
        qx += dot(nibbles4(q[k], 0u), xa) + dot(nibbles4(q[k], 4u), xc);
        sx += dot(xa + xc, one);
    }
    let dm = unpack2x16float(plane_u32(1u, bi));
    return dm.x * qx + dm.y * sx;
}
