// Matvec part for Q3_K: a slice is a whole 110-byte super-block (8 units), taken by PARTS = 32
// neighbouring lanes, laid out as Q2_K's: lane j reads word i = j % 16 of qs (lanes 0..15 and
// 16..31 each cover it contiguously; half n = i / 8, bytes l = 4 (i % 8)) and word l / 4 of
// hmask, and takes quarters k = 2kk and 2kk + 1 (kk = j / 16) of the half: low bits 2k of qs,
// third bit 4n + k of hmask. Sub-block 8n + 2k + l / 16, scale from `q3_k_scale`
// (formats/q3_k.wgsl). Blocks start at any even byte: unaligned loads.
const PARTS: u32 = 32u;
const SLICE_UNITS: u32 = 8u;

fn part_dot(blk: u32, unit: u32, part: u32, xb: u32) -> f32 {
    let i = part & 15u;
    let n = i >> 3u;
    let l = 4u * (i & 7u);
    let k = 2u * (part >> 4u);
    let q = load_u32(blk + 32u + 4u * i) >> (2u * k);
    let h = load_u32(blk + l) >> (4u * n + k);
    let ca = (q & 0x03030303u) | ((h & 0x01010101u) << 2u);
    let cc = ((q >> 2u) & 0x03030303u) | (((h >> 1u) & 0x01010101u) << 2u);
    let xa = x4(xb + 128u * n + 32u * k + l);
    let xc = x4(xb + 128u * n + 32u * k + 32u + l);
    let s = 8u * n + 2u * k + (l >> 4u);
    return q3_k_scale(blk, s) * dot(vec4<f32>(unpack4xU8(ca)) - 4.0, xa)
        + q3_k_scale(blk, s + 2u) * dot(vec4<f32>(unpack4xU8(cc)) - 4.0, xc);
}
