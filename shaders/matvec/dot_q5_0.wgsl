// Matvec inner loop for Q5_0 (f16 d, u32 qh of fifth bits, 16 bytes of nibbles; codes as in
// formats/q5_codes.wgsl): d * sum (q - 16) x; part i = word i of nibbles (8 weights).
const PARTS: u32 = 4u;
const STEP_UNITS: u32 = 1u;

fn part_dot(blk: u32, unit: u32, part: u32, xb: u32) -> f32 {
    let c = q5_codes(load_u32(blk + 6u + 4u * part), load_u32(blk + 2u), part);
    let lo = vec4<f32>(unpack4xU8(c.x)) - 16.0;
    let hi = vec4<f32>(unpack4xU8(c.y)) - 16.0;
    return load_f16(blk) * (dot(lo, x4(xb + 4u * part)) + dot(hi, x4(xb + 16u + 4u * part)));
}
