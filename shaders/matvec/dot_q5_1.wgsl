// Matvec inner loop for Q5_1 (f16 d, f16 m, u32 qh of fifth bits, 16 bytes of nibbles; codes
// as in formats/q5_codes.wgsl): d * sum q x + m * sum x; part i = word i of nibbles (8
// weights), so the PARTS = 4 lanes of a block read its 4 words of nibbles side by side.
const PARTS: u32 = 4u;
const SLICE_UNITS: u32 = 1u;

fn part_dot(blk: u32, unit: u32, part: u32, xb: u32) -> f32 {
    let c = q5_codes(load_u32(blk + 8u + 4u * part), load_u32(blk + 4u), part);
    let xl = x4(xb + 4u * part);
    let xh = x4(xb + 16u + 4u * part);
    let qx = dot(vec4<f32>(unpack4xU8(c.x)), xl) + dot(vec4<f32>(unpack4xU8(c.y)), xh);
    return load_f16(blk) * qx + load_f16(blk + 2u) * dot(xl + xh, vec4<f32>(1.0));
}
