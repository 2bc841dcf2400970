// Matvec part for Q2_K: a slice is a whole 84-byte super-block (8 units), taken by PARTS = 32
// neighbouring lanes. Lane j reads word i = j % 16 of the 64 bytes of levels (lanes 0..15 and
// 16..31 each cover qs contiguously): in half n = i / 8 its 4 bytes at l = 4 (i % 8) hold
// weights l..l+3 of the half's four quarters (2 bits each); lane j takes quarters 2kk and
// 2kk + 1, kk = j / 16. Quarter k's weights l..l+3 are sub-block 8n + 2k + l / 16.
// w = (d * sc) * q - dmin * m, so the part is dl * sum q x - ml * sum x per sub-block.
const PARTS: u32 = 32u;
const SLICE_UNITS: u32 = 8u;

fn part_dot(blk: u32, unit: u32, part: u32, xb: u32) -> f32 {
    let i = part & 15u;
    let n = i >> 3u;
    let l = 4u * (i & 7u);
    let k = 2u * (part >> 4u);
    // Super-blocks are 84 bytes and rows start 4-byte aligned: one aligned load.
    let q = wd((blk + 16u + 4u * i) >> 2u) >> (2u * k);
    let xa = x4(xb + 128u * n + 32u * k + l);
    let xc = x4(xb + 128u * n + 32u * k + 32u + l);
    let s = 8u * n + 2u * k + (l >> 4u);
    let a = q2_k_scale_min(blk, s);
    let b = q2_k_scale_min(blk, s + 2u);
    let qa = vec4<f32>(unpack4xU8(q & 0x03030303u));
    let qc = vec4<f32>(unpack4xU8((q >> 2u) & 0x03030303u));
    let one = vec4<f32>(1.0);
    return a.x * dot(qa, xa) + b.x * dot(qc, xc) - (a.y * dot(xa, one) + b.y * dot(xc, one));
}
