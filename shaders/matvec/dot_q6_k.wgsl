// Matvec part for Q6_K (planes: ql then qh, 12 vec4s per super-block; the 16 int8 scales; d):
// a step is a whole super-block (8 units) taken by PARTS = 4 neighbouring lanes. Lane
// (n = part / 2, h = part % 2) takes positions l = 16h .. 16h + 15 of the four quarters of half
// n: three vec4 loads, ql bytes 64n + 16h (low nibbles: quarter 0, high: quarter 2), ql bytes
// 64n + 32 + 16h (quarters 1 and 3) and qh bytes 32n + 16h (2 bits for each quarter), i.e. 64
// weights. Quarter k of that range has the single scale 8n + 2k + h.
const PARTS: u32 = 4u;
const STEP_UNITS: u32 = 8u;

// One row's sums of (q - 32) x for the four quarters (inputs x0..x3): the c-th words of its
// three loads a (ql, quarters 0 and 2), b (ql, quarters 1 and 3) and hb (qh).
fn q6_k_quarters(a: u32, b: u32, hb: u32, x0: vec4<f32>, x1: vec4<f32>, x2: vec4<f32>, x3: vec4<f32>) -> vec4<f32> {
    let q0 = (a & 0x0f0f0f0fu) | ((hb & 0x03030303u) << 4u);
    let q1 = (b & 0x0f0f0f0fu) | (((hb >> 2u) & 0x03030303u) << 4u);
    let q2 = ((a >> 4u) & 0x0f0f0f0fu) | (((hb >> 4u) & 0x03030303u) << 4u);
    let q3 = ((b >> 4u) & 0x0f0f0f0fu) | (((hb >> 6u) & 0x03030303u) << 4u);
    return vec4<f32>(
        dot(vec4<f32>(unpack4xU8(q0)) - 32.0, x0),
        dot(vec4<f32>(unpack4xU8(q1)) - 32.0, x1),
        dot(vec4<f32>(unpack4xU8(q2)) - 32.0, x2),
        dot(vec4<f32>(unpack4xU8(q3)) - 32.0, x3),
    );
}

// The 4 rows' parts; each input vec4 is loaded once for the 4 rows.
fn rows_dot4(blk: vec4<u32>, unit: u32, part: u32, xb: u32) -> vec4<f32> {
    let bi = blk / BLOCK_BYTES;
    let n = part >> 1u;
    let h = part & 1u;
    let o = vec4<u32>(1u) + 12u * bi;
    // The scales and d first: their loads then overlap the quants' instead of following the
    // sums (H100, 4096x14336: 53.2% -> 59.5% of 2.18 TB/s, with the plane starts cached).
    // Q4_K's heads moved the same way measured slower (54% -> 46%: registers).
    let ps = plane_start(1u);
    let sc0 = w[ps + bi.x];
    let sc1 = w[ps + bi.y];
    let sc2 = w[ps + bi.z];
    let sc3 = w[ps + bi.w];
    let d = vec4<f32>(plane_f16(2u, bi.x), plane_f16(2u, bi.y), plane_f16(2u, bi.z), plane_f16(2u, bi.w));
    let a0 = w[o.x + 4u * n + h];
    let a1 = w[o.y + 4u * n + h];
    let a2 = w[o.z + 4u * n + h];
    let a3 = w[o.w + 4u * n + h];
    let b0 = w[o.x + 4u * n + 2u + h];
    let b1 = w[o.y + 4u * n + 2u + h];
    let b2 = w[o.z + 4u * n + 2u + h];
    let b3 = w[o.w + 4u * n + 2u + h];
    let h0 = w[o.x + 8u + 2u * n + h];
    let h1 = w[o.y + 8u + 2u * n + h];
    let h2 = w[o.z + 8u + 2u * n + h];
    let h3 = w[o.w + 8u + 2u * n + h];
    let xo = xb + 128u * n + 16u * h;
    var s0 = vec4<f32>(0.0);
    var s1 = vec4<f32>(0.0);
    var s2 = vec4<f32>(0.0);
    var s3 = vec4<f32>(0.0);
    for (var c = 0u; c < 4u; c++) {
        let x0 = x4(xo + 4u * c);
        let x1 = x4(xo + 32u + 4u * c);
        let x2 = x4(xo + 64u + 4u * c);
        let x3 = x4(xo + 96u + 4u * c);
        s0 += q6_k_quarters(a0[c], b0[c], h0[c], x0, x1, x2, x3);
        s1 += q6_k_quarters(a1[c], b1[c], h1[c], x0, x1, x2, x3);
        s2 += q6_k_quarters(a2[c], b2[c], h2[c], x0, x1, x2, x3);
        s3 += q6_k_quarters(a3[c], b3[c], h3[c], x0, x1, x2, x3);
    }
    return vec4<f32>(
        q6_k_row(sc0, d.x, n, h, s0),
        q6_k_row(sc1, d.y, n, h, s1),
        q6_k_row(sc2, d.z, n, h, s2),
        q6_k_row(sc3, d.w, n, h, s3),
    );
}
