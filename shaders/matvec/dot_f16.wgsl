// Matvec part for F16 rows: a unit of 32 weights (16 words of two f16) is 8 parts of 2 words.
// Rows start at even byte offsets (load_u32 handles the 2-byte misalignment).

fn f16_part(b: u32, i: u32, xb: u32) -> f32 {
    let lo = unpack2x16float(load_u32(b + 8u * i));
    let hi = unpack2x16float(load_u32(b + 8u * i + 4u));
    return dot(vec4<f32>(lo, hi), x4(xb + 4u * i));
}

const PARTS: u32 = 8u;
const SLICE_UNITS: u32 = 1u;

fn part_dot(blk: u32, unit: u32, part: u32, xb: u32) -> f32 {
    return f16_part(blk, part, xb);
}
