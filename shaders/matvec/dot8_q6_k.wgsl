// Matvec part for Q6_K with a q8 input (matvec/x_q8.wgsl): the lane layout and loads of
// dot_q6_k.wgsl (PARTS = 8 lanes per super-block; lane (n = part / 4, h = part / 2 % 2,
// j = part % 2) takes positions 16h .. 16h + 15 of quarters j and j + 2 of half n: two vec4
// loads, 32 weights). Per quarter the integer sums over both input digits (`dot8`), sum q x
// (codes 0..63) and sum x, are exact, so sum (q - 32) x = sum q x - 32 sum x is too (and below
// 2^24: exact in f32); each quarter is its own input block, scaled by its d_x / 254 before
// the quarter's scale and d apply.
const PARTS: u32 = 8u;
const SLICE_UNITS: u32 = 8u;

// One row's sums of q x for quarters j (low nibbles of `a`) and j + 2 (high nibbles): the c-th
// words of its loads a (ql) and hb (qh), with the quarters' c-th input words (`x1`: first
// digits, `x2`: second digits; x = quarter j, y = quarter j + 2).
fn q6_k_pair8(a: u32, hb: u32, j2: u32, x1: vec2<u32>, x2: vec2<u32>) -> vec2<i32> {
    let ql = (a & 0x0f0f0f0fu) | (((hb >> j2) & 0x03030303u) << 4u);
    let qh = ((a >> 4u) & 0x0f0f0f0fu) | (((hb >> (j2 + 4u)) & 0x03030303u) << 4u);
    return vec2<i32>(dot8(ql, x1.x, x2.x), dot8(qh, x1.y, x2.y));
}

// The 4 rows' parts; each input vec4 is loaded once for the 4 rows.
fn rows_dot4(blk: vec4<u32>, unit: u32, part: u32, xb: u32) -> vec4<f32> {
    let bi = blk / BLOCK_BYTES;
    let n = part >> 2u;
    let h = (part >> 1u) & 1u;
    let j = part & 1u;
    let o = vec4<u32>(1u) + 12u * bi;
    let b = 2u * j + h;
    let sc0 = q6_k_scale_pair(bi.x, n, b);
    let sc1 = q6_k_scale_pair(bi.y, n, b);
    let sc2 = q6_k_scale_pair(bi.z, n, b);
    let sc3 = q6_k_scale_pair(bi.w, n, b);
    let d = vec4<f32>(plane_f16(2u, bi.x), plane_f16(2u, bi.y), plane_f16(2u, bi.z), plane_f16(2u, bi.w));
    let a0 = w[o.x + 4u * n + 2u * j + h];
    let a1 = w[o.y + 4u * n + 2u * j + h];
    let a2 = w[o.z + 4u * n + 2u * j + h];
    let a3 = w[o.w + 4u * n + 2u * j + h];
    let h0 = w[o.x + 8u + 2u * n + h];
    let h1 = w[o.y + 8u + 2u * n + h];
    let h2 = w[o.z + 8u + 2u * n + h];
    let h3 = w[o.w + 8u + 2u * n + h];
    let xo = xb + 128u * n + 32u * j + 16u * h;
    let xl = xq16(xo);
    let xh = xq16(xo + 64u);
    let yl = xq16_lo(xo);
    let yh = xq16_lo(xo + 64u);
    let j2 = 2u * j;
    var s0 = vec2<i32>(0);
    var s1 = vec2<i32>(0);
    var s2 = vec2<i32>(0);
    var s3 = vec2<i32>(0);
    var sx = vec2<i32>(0);
    for (var c = 0u; c < 4u; c++) {
        let xc = vec2<u32>(xl[c], xh[c]);
        let yc = vec2<u32>(yl[c], yh[c]);
        sx += vec2<i32>(dot8(0x01010101u, xc.x, yc.x), dot8(0x01010101u, xc.y, yc.y));
        s0 += q6_k_pair8(a0[c], h0[c], j2, xc, yc);
        s1 += q6_k_pair8(a1[c], h1[c], j2, xc, yc);
        s2 += q6_k_pair8(a2[c], h2[c], j2, xc, yc);
        s3 += q6_k_pair8(a3[c], h3[c], j2, xc, yc);
    }
    // Per quarter: d_x / 254 (sum q x - 32 sum x), exact until the multiply.
    let dx = vec2<f32>(xd(xo), xd(xo + 64u));
    let off = 32 * sx;
    return d * vec4<f32>(
        dot(sc0, dx * vec2<f32>(s0 - off)),
        dot(sc1, dx * vec2<f32>(s1 - off)),
        dot(sc2, dx * vec2<f32>(s2 - off)),
        dot(sc3, dx * vec2<f32>(s3 - off)),
    );
}
