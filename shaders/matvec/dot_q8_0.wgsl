// Matvec part for Q8_0 (planes: 32 bytes of q per block, then f16 d): a block is 2 parts of 16
// weights, one vec4 load of q each, so neighbouring lanes read neighbouring 16 bytes.
const PARTS: u32 = 2u;
const STEP_UNITS: u32 = 1u;

fn part_dot(blk: u32, unit: u32, part: u32, xb: u32) -> f32 {
    let bi = blk / BLOCK_BYTES;
    let q = w[1u + 2u * bi + part];
    let xo = xb + 16u * part;
    let s = dot(vec4<f32>(unpack4xI8(q.x)), x4(xo)) + dot(vec4<f32>(unpack4xI8(q.y)), x4(xo + 4u))
        + dot(vec4<f32>(unpack4xI8(q.z)), x4(xo + 8u)) + dot(vec4<f32>(unpack4xI8(q.w)), x4(xo + 12u));
    return plane_f16(1u, bi) * s;
}
