// Matvec inner loop for Q8_0 (f16 d, 32 x int8): d * sum q x; part i = word i (4 weights).

fn q8_0_part(b: u32, i: u32, xb: u32) -> f32 {
    return dot(vec4<f32>(unpack4xI8(load_u32(b + 2u + 4u * i))), x4(xb + 4u * i));
}

const PARTS: u32 = 8u;
const STEP_UNITS: u32 = 1u;

fn part_dot(blk: u32, unit: u32, part: u32, xb: u32) -> f32 {
    return load_f16(blk) * q8_0_part(blk, part, xb);
}
