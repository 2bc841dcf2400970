// Matvec part for Q6_K with a q8 input (matvec/x_q8.wgsl): the lane layout and loads of
// dot_q6_k.wgsl (PARTS = 4 lanes per super-block; lane (n = part / 2, h = part % 2) takes
// positions 16h .. 16h + 15 of the four quarters of half n: three vec4 loads, 64 weights).
// Per quarter the integer sums over both input digits (`dot8`), sum q x (codes 0..63) and
// sum x, are exact, so sum (q - 32) x = sum q x - 32 sum x is too (and below 2^24: exact in
// f32); each quarter is its own input block, scaled by its d_x / 254 before `q6_k_row`
// (formats/q6_k.wgsl) applies the quarter's scale and d. The lane holds 8 input vec4s (both
// digits of 4 quarters) where the one-digit file held 4.
const PARTS: u32 = 4u;
const STEP_UNITS: u32 = 8u;

// One row's sums of q x for the four quarters: the c-th words of its three loads a (ql,
// quarters 0 and 2), b (ql, quarters 1 and 3) and hb (qh), with the quarters' c-th input
// words `x1` (first digits) and `x2` (second digits).
fn q6_k_quarters8(a: u32, b: u32, hb: u32, x1: vec4<u32>, x2: vec4<u32>) -> vec4<i32> {
    let q0 = (a & 0x0f0f0f0fu) | ((hb & 0x03030303u) << 4u);
    let q1 = (b & 0x0f0f0f0fu) | (((hb >> 2u) & 0x03030303u) << 4u);
    let q2 = ((a >> 4u) & 0x0f0f0f0fu) | (((hb >> 4u) & 0x03030303u) << 4u);
    let q3 = ((b >> 4u) & 0x0f0f0f0fu) | (((hb >> 6u) & 0x03030303u) << 4u);
    return vec4<i32>(dot8(q0, x1.x, x2.x), dot8(q1, x1.y, x2.y), dot8(q2, x1.z, x2.z), dot8(q3, x1.w, x2.w));
}

// The 4 rows' parts; each input vec4 is loaded once for the 4 rows.
fn rows_dot4(blk: vec4<u32>, unit: u32, part: u32, xb: u32) -> vec4<f32> {
    let bi = blk / BLOCK_BYTES;
    let n = part >> 1u;
    let h = part & 1u;
    let o = vec4<u32>(1u) + 12u * bi;
    // The scales and d first, as in dot_q6_k.wgsl.
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
    let x0 = xq16(xo);
    let x1 = xq16(xo + 32u);
    let x2 = xq16(xo + 64u);
    let x3 = xq16(xo + 96u);
    let y0 = xq16_lo(xo);
    let y1 = xq16_lo(xo + 32u);
    let y2 = xq16_lo(xo + 64u);
    let y3 = xq16_lo(xo + 96u);
    var s0 = vec4<i32>(0);
    var s1 = vec4<i32>(0);
    var s2 = vec4<i32>(0);
    var s3 = vec4<i32>(0);
    var sx = vec4<i32>(0);
    for (var c = 0u; c < 4u; c++) {
        let xc = vec4<u32>(x0[c], x1[c], x2[c], x3[c]);
        let yc = vec4<u32>(y0[c], y1[c], y2[c], y3[c]);
        sx += vec4<i32>(
            dot8(0x01010101u, xc.x, yc.x),
            dot8(0x01010101u, xc.y, yc.y),
            dot8(0x01010101u, xc.z, yc.z),
            dot8(0x01010101u, xc.w, yc.w),
        );
        s0 += q6_k_quarters8(a0[c], b0[c], h0[c], xc, yc);
        s1 += q6_k_quarters8(a1[c], b1[c], h1[c], xc, yc);
        s2 += q6_k_quarters8(a2[c], b2[c], h2[c], xc, yc);
        s3 += q6_k_quarters8(a3[c], b3[c], h3[c], xc, yc);
    }
    // Per quarter: d_x / 254 (sum q x - 32 sum x), exact until the multiply.
    let dx = vec4<f32>(xd(xo), xd(xo + 32u), xd(xo + 64u), xd(xo + 96u));
    let off = 32 * sx;
    return vec4<f32>(
        q6_k_row(sc0, d.x, n, h, dx * vec4<f32>(s0 - off)),
        q6_k_row(sc1, d.y, n, h, dx * vec4<f32>(s1 - off)),
        q6_k_row(sc2, d.z, n, h, dx * vec4<f32>(s2 - off)),
        q6_k_row(sc3, d.w, n, h, dx * vec4<f32>(s3 - off)),
    );
}
