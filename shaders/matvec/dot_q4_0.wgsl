// Matvec inner loop for Q4_0 (f16 d, 16 bytes of nibbles; low nibbles are weights 0..15, high
// 16..31): d * sum (q - 8) x; part i = word i
// of nibbles (8 weights).

fn q4_0_part(b: u32, i: u32, xb: u32) -> f32 {
    let q = load_u32(b + 2u + 4u * i);
    return dot(nibbles4(q, 0u) - 8.0, x4(xb + 4u * i)) + dot(nibbles4(q, 4u) - 8.0, x4(xb + 16u + 4u * i));
}

const PARTS: u32 = 4u;
const STEP_UNITS: u32 = 1u;

fn part_dot(blk: u32, unit: u32, part: u32, xb: u32) -> f32 {
    return load_f16(blk) * q4_0_part(blk, part, xb);
}
