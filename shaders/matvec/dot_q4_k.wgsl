// Matvec part for Q4_K: a step is a whole 144-byte super-block (8 units), taken by PARTS = 32
// neighbouring lanes; lane j reads word j of the 128 bytes of nibbles (one load per lane, the
// 32 lanes cover the super-block contiguously). Word j holds weights l..l+3 (l = 4 (j % 8))
// of unit 2g (low nibbles) and of unit 2g + 1 (high nibbles), g = j / 8. Each unit's 6-bit
// scale and min come from the packed 12 bytes (formats/scale_min_k4.wgsl);
// w = d * sc * q - dmin * m.
const PARTS: u32 = 32u;
const STEP_UNITS: u32 = 8u;

fn part_dot(blk: u32, unit: u32, part: u32, xb: u32) -> f32 {
    let g = part >> 3u;
    let l = 4u * (part & 7u);
    // Super-blocks are 144 bytes and rows start 4-byte aligned: one aligned load.
    let q = w[(blk + 16u + 4u * part) >> 2u];
    let xa = x4(xb + 64u * g + l);
    let xc = x4(xb + 64u * g + 32u + l);
    let a = scale_min_k4(blk + 4u, 2u * g);
    let b = scale_min_k4(blk + 4u, 2u * g + 1u);
    let d = load_f16(blk);
    let dmin = load_f16(blk + 2u);
    let one = vec4<f32>(1.0);
    return d * (a.x * dot(nibbles4(q, 0u), xa) + b.x * dot(nibbles4(q, 4u), xc))
        - dmin * (a.y * dot(xa, one) + b.y * dot(xc, one));
}
