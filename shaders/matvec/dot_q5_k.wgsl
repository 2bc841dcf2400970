// Matvec part for Q5_K: a slice is a whole 176-byte super-block (8 units), taken by PARTS = 32
// neighbouring lanes as in Q4_K: lane j reads word j of the 128 bytes of nibbles (the 32 lanes
// cover them contiguously), weights l..l+3 (l = 4 (j % 8)) of units 2g (low nibbles) and
// 2g + 1 (high), g = j / 8, and word l / 4 of the 32 bytes of fifth bits (bits 2g and 2g + 1
// of each byte). Scales and mins from formats/scales_k4.wgsl; w = d * sc * q - dmin * m.
const PARTS: u32 = 32u;
const SLICE_UNITS: u32 = 8u;

fn part_dot(blk: u32, unit: u32, part: u32, xb: u32) -> f32 {
    let g = part >> 3u;
    let l = 4u * (part & 7u);
    // Super-blocks are 176 bytes and rows start 4-byte aligned: aligned loads.
    let q = wd((blk + 48u + 4u * part) >> 2u);
    let h = wd((blk + 16u + l) >> 2u) >> (2u * g);
    let ca = (q & 0x0f0f0f0fu) | ((h & 0x01010101u) << 4u);
    let cc = ((q >> 4u) & 0x0f0f0f0fu) | (((h >> 1u) & 0x01010101u) << 4u);
    let xa = x4(xb + 64u * g + l);
    let xc = x4(xb + 64u * g + 32u + l);
    // (sc, sc, m, m) of units 2g and 2g + 1.
    let s = scales_k4_pair(scales_k4_words_at(blk + 4u), g);
    let d = load_f16(blk);
    let dmin = load_f16(blk + 2u);
    let one = vec4<f32>(1.0);
    return d * (s.x * dot(vec4<f32>(unpack4xU8(ca)), xa) + s.y * dot(vec4<f32>(unpack4xU8(cc)), xc))
        - dmin * (s.z * dot(xa, one) + s.w * dot(xc, one));
}
