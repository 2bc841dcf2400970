// Matvec part for BF16 rows: a unit of 32 weights (16 words of two bf16) is 8 parts of 2 words
// (`bf16_pair` from formats/bf16.wgsl). Rows start at even byte offsets (load_u32 handles the
// 2-byte misalignment).
const PARTS: u32 = 8u;
const SLICE_UNITS: u32 = 1u;

fn part_dot(blk: u32, unit: u32, part: u32, xb: u32) -> f32 {
    let lo = bf16_pair(load_u32(blk + 8u * part));
    let hi = bf16_pair(load_u32(blk + 8u * part + 4u));
    return dot(vec4<f32>(lo, hi), x4(xb + 4u * part));
}
