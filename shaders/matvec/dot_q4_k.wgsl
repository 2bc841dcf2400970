// Matvec part for Q4_K (GGUF layout: 144-byte super-blocks are 9 vec4s, so blocks stay 16-byte
// aligned and need no planes): a step is a whole super-block (8 units) taken by PARTS = 8
// neighbouring lanes. Lane j (g = j / 2, h = j % 2) loads one vec4, bytes 32g + 16h .. + 16
// of the 128 bytes of nibbles: positions 16h .. 16h + 15 of unit 2g (low
// nibbles) and of unit 2g + 1 (high nibbles). The first vec4 holds f16 d, f16 dmin and the 12
// bytes of packed 6-bit (scale, min). w = d * sc * q - dmin * m.
const PARTS: u32 = 8u;
const STEP_UNITS: u32 = 8u;

// Byte `b` (0..11) of the packed scales, from the block's first vec4 (bytes 4..15).
fn q4_k_sbyte(head: vec4<u32>, b: u32) -> u32 {
    return ubyte(head[1u + (b >> 2u)], b & 3u);
}

// (scale, min) of unit `u` (0..7).
fn q4_k_scale_min_v(head: vec4<u32>, u: u32) -> vec2<f32> {
    if u < 4u {
        return vec2<f32>(f32(q4_k_sbyte(head, u) & 63u), f32(q4_k_sbyte(head, u + 4u) & 63u));
    }
    let sc = (q4_k_sbyte(head, u + 4u) & 0xfu) | ((q4_k_sbyte(head, u - 4u) >> 6u) << 4u);
    let m = (q4_k_sbyte(head, u + 4u) >> 4u) | ((q4_k_sbyte(head, u) >> 6u) << 4u);
    return vec2<f32>(f32(sc), f32(m));
}

fn part_dot(blk: u32, unit: u32, part: u32, xb: u32) -> f32 {
    let base = blk >> 4u;
    let g = part >> 1u;
    let h = part & 1u;
    let head = w[base];
    let q = w[base + 1u + 2u * g + h];
    let xo = xb + 64u * g + 16u * h;
    let one = vec4<f32>(1.0);
    var qa = 0.0;
    var qb = 0.0;
    var sa = 0.0;
    var sb = 0.0;
    for (var c = 0u; c < 4u; c++) {
        let xa = x4(xo + 4u * c);
        let xc = x4(xo + 32u + 4u * c);
        qa += dot(nibbles4(q[c], 0u), xa);
        qb += dot(nibbles4(q[c], 4u), xc);
        sa += dot(xa, one);
        sb += dot(xc, one);
    }
    let a = q4_k_scale_min_v(head, 2u * g);
    let b = q4_k_scale_min_v(head, 2u * g + 1u);
    let dm = unpack2x16float(head.x);
    return dm.x * (a.x * qa + b.x * qb) - dm.y * (a.y * sa + b.y * sb);
}
