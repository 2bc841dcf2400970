// Matvec part for Q6_K: a step is a whole 210-byte super-block (8 units), taken by PARTS = 32
// neighbouring lanes. In half n, quarter k (unit 4n + k) weight l is the 4-bit
// ql[64n + 32(k%2) + l] >> 4(k/2) with the 2 bits qh[32n + l] >> 2k, scaled by
// scales[8n + 2k + l/16]; w = d * scale * (q - 32). Lane j (n = j / 16, kk = (j / 8) % 2,
// l = 4 (j % 8)) reads ql word 64n + 32kk + l (the 32 lanes cover ql contiguously) and qh word
// 32n + l: its low nibbles are weights l..l+3 of quarter kk, its high nibbles of quarter kk + 2.
const PARTS: u32 = 32u;
const STEP_UNITS: u32 = 8u;

fn part_dot(blk: u32, unit: u32, part: u32, xb: u32) -> f32 {
    let n = part >> 4u;
    let kk = (part >> 3u) & 1u;
    let l = 4u * (part & 7u);
    let ql = load_u32(blk + 64u * n + 32u * kk + l);
    let qh = load_u32(blk + 128u + 32u * n + l);
    let lo = (ql & 0x0f0f0f0fu) | (((qh >> (2u * kk)) & 0x03030303u) << 4u);
    let hi = ((ql >> 4u) & 0x0f0f0f0fu) | (((qh >> (2u * kk + 4u)) & 0x03030303u) << 4u);
    let sc = blk + 192u + 8u * n + 2u * kk + (l >> 4u);
    let xa = x4(xb + 128u * n + 32u * kk + l);
    let xc = x4(xb + 128u * n + 32u * kk + 64u + l);
    let d = load_f16(blk + 208u);
    return d * (f32(sbyte(load_u8(sc), 0u)) * dot(vec4<f32>(unpack4xU8(lo)) - 32.0, xa)
        + f32(sbyte(load_u8(sc + 4u), 0u)) * dot(vec4<f32>(unpack4xU8(hi)) - 32.0, xc));
}
