// Matvec part for Q5_K with a q8 input (matvec/x_q8.wgsl): the lane layout and loads of
// dot_q5_k.wgsl (PARTS = 32 lanes per super-block; lane j reads word j of the nibbles:
// weights l .. l + 3, l = 4 (j % 8), of units 2g and 2g + 1, g = j / 8, with their fifth bits;
// matvec/rows_each.wgsl calls it per row). Per unit the integer sums over both input digits
// (`dot8`), sum q x (codes 0..31) and sum x, are exact; d_x / 254 (d sc sum q x -
// dmin m sum x) per unit, as in the f32 file.
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
    let ia = xb + 64u * g + l;
    let ic = ia + 32u;
    let a1 = xq4(ia);
    let a2 = xq4_lo(ia);
    let c1 = xq4(ic);
    let c2 = xq4_lo(ic);
    // (sc, sc, m, m) of units 2g and 2g + 1.
    let s = scales_k4_pair(scales_k4_words_at(blk + 4u), g);
    let d = load_f16(blk);
    let dmin = load_f16(blk + 2u);
    let ua = d * s.x * f32(dot8(ca, a1, a2)) - dmin * s.z * f32(dot8(0x01010101u, a1, a2));
    let uc = d * s.y * f32(dot8(cc, c1, c2)) - dmin * s.w * f32(dot8(0x01010101u, c1, c2));
    return xd(ia) * ua + xd(ic) * uc;
}
