// Matvec inner loop for Q4_1 (f16 d, f16 m, 16 bytes of nibbles): d * sum q x + m * sum x;
// part i = word i of nibbles (8 weights).

fn q4_1_part(b: u32, i: u32, xb: u32) -> vec2<f32> {
    let q = load_u32(b + 4u + 4u * i);
    let xl = x4(xb + 4u * i);
    let xh = x4(xb + 16u + 4u * i);
    return vec2<f32>(dot(nibbles4(q, 0u), xl) + dot(nibbles4(q, 4u), xh), dot(xl + xh, vec4<f32>(1.0)));
}

const PARTS: u32 = 4u;
const STEP_UNITS: u32 = 1u;

fn part_dot(blk: u32, unit: u32, part: u32, xb: u32) -> f32 {
    let s = q4_1_part(blk, part, xb);
    return load_f16(blk) * s.x + load_f16(blk + 2u) * s.y;
}
