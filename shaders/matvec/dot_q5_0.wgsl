// Matvec inner loop for Q5_0 (f16 d, u32 qh of fifth bits, 16 bytes of nibbles): weight j < 16
// is the low nibble of byte j with bit j of qh, weight j + 16 the high nibble with bit j + 16;
// d * sum (q - 16) x; part i = word i of nibbles (8 weights).

// Bits k, k+1, k+2, k+3 of qh, as a fifth bit (16) per lane.
fn q5_high(qh: u32, k: u32) -> vec4<u32> {
    let h = qh >> k;
    return (vec4<u32>(h, h >> 1u, h >> 2u, h >> 3u) & vec4<u32>(1u)) << vec4<u32>(4u);
}

fn q5_0_part(b: u32, qh: u32, i: u32, xb: u32) -> f32 {
    let q = load_u32(b + 6u + 4u * i);
    let lo = vec4<f32>(unpack4xU8(q & 0x0f0f0f0fu) | q5_high(qh, 4u * i)) - 16.0;
    let hi = vec4<f32>(unpack4xU8((q >> 4u) & 0x0f0f0f0fu) | q5_high(qh, 16u + 4u * i)) - 16.0;
    return dot(lo, x4(xb + 4u * i)) + dot(hi, x4(xb + 16u + 4u * i));
}

const PARTS: u32 = 4u;
const STEP_UNITS: u32 = 1u;

fn part_dot(blk: u32, unit: u32, part: u32, xb: u32) -> f32 {
    return load_f16(blk) * q5_0_part(blk, load_u32(blk + 2u), part, xb);
}
