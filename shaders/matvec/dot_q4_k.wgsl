// Matvec part for Q4_K (GGUF layout: 144-byte super-blocks are 9 vec4s, so blocks stay 16-byte
// aligned and need no planes): a step is a whole super-block (8 units) taken by PARTS = 8
// neighbouring lanes. Lane j (g = j / 2, h = j % 2) loads one vec4, bytes 32g + 16h .. + 16
// of the 128 bytes of nibbles: positions 16h .. 16h + 15 of unit 2g (low
// nibbles) and of unit 2g + 1 (high nibbles). The first vec4 holds f16 d, f16 dmin and the 12
// bytes of packed 6-bit (scale, min) (formats/scale_min_k4.wgsl). w = d * sc * q - dmin * m.
const PARTS: u32 = 8u;
const STEP_UNITS: u32 = 8u;

// The part's inputs, loaded once for the R rows: a[c] = x[16h + 4c ..] of unit 2g, b[c] the
// same of unit 2g + 1, and the sum of each (for the mins).
struct PartX {
    a: array<vec4<f32>, 4>,
    b: array<vec4<f32>, 4>,
    sums: vec2<f32>,
}

fn part_x(part: u32, xb: u32) -> PartX {
    let xo = xb + 64u * (part >> 1u) + 16u * (part & 1u);
    var v: PartX;
    var sa = vec4<f32>(0.0);
    var sb = vec4<f32>(0.0);
    for (var c = 0u; c < 4u; c++) {
        v.a[c] = x4(xo + 4u * c);
        v.b[c] = x4(xo + 32u + 4u * c);
        sa += v.a[c];
        sb += v.b[c];
    }
    let one = vec4<f32>(1.0);
    v.sums = vec2<f32>(dot(sa, one), dot(sb, one));
    return v;
}

fn part_dot(blk: u32, unit: u32, part: u32, xv: PartX) -> f32 {
    let base = blk >> 4u;
    let g = part >> 1u;
    let head = w[base];
    let q = w[base + 1u + part];
    var qa = 0.0;
    var qb = 0.0;
    for (var c = 0u; c < 4u; c++) {
        qa += dot(nibbles4(q[c], 0u), xv.a[c]);
        qb += dot(nibbles4(q[c], 4u), xv.b[c]);
    }
    let a = scale_min_k4_words(head.yzw, 2u * g);
    let b = scale_min_k4_words(head.yzw, 2u * g + 1u);
    let dm = unpack2x16float(head.x);
    return dm.x * (a.x * qa + b.x * qb) - dm.y * (a.y * xv.sums.x + b.y * xv.sums.y);
}
