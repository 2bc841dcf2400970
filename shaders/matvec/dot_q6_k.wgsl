// Matvec part for Q6_K (planes: ql then qh, 12 vec4s per super-block; the 16 int8 scales; d):
// a slice is a whole super-block (8 units) taken by PARTS = 8 neighbouring lanes. Lane
// (n = part / 4, h = part / 2 % 2, j = part % 2) takes positions l = 16h .. 16h + 15 of quarters
// j and j + 2 of half n: two vec4 loads, ql bytes 64n + 32j + 16h (low nibbles: quarter j, high:
// quarter j + 2) and qh bytes 32n + 16h (2 bits for each quarter; the lane pair j = 0, 1 loads
// the same vec4), i.e. 32 weights. Quarter k of that range has the single scale 8n + 2k + h.
// `ops::matvec::lanes` overrides PARTS with 16 for a product of few, short rows (half the
// chain a lane): lanes 2p and 2p + 1 then take words 0-1 and 2-3 of lane p's two loads.
// Eight lanes rather than four (three vec4 loads and 64 weights a row each): half the
// registers a lane, and twice the lanes for short rows (docs/PERF.md, D-q6k-eight-lanes:
// 59.5% -> 64.2% of 2.18 TB/s at 4096x14336, 8.25 -> 5.89 us at 2048x640).
override PARTS: u32 = 8u;
const SLICE_UNITS: u32 = 8u;

// One row's sums of (q - 32) x for quarters j (low nibbles of `a`) and j + 2 (high nibbles):
// the c-th words of its two loads a (ql) and hb (qh), shifted to the quarter's 2 bits.
fn q6_k_pair(a: u32, hb: u32, j2: u32, xl: vec4<f32>, xh: vec4<f32>) -> vec2<f32> {
    let ql = (a & 0x0f0f0f0fu) | (((hb >> j2) & 0x03030303u) << 4u);
    let qh = ((a >> 4u) & 0x0f0f0f0fu) | (((hb >> (j2 + 4u)) & 0x03030303u) << 4u);
    return vec2<f32>(dot(vec4<f32>(unpack4xU8(ql)) - 32.0, xl), dot(vec4<f32>(unpack4xU8(qh)) - 32.0, xh));
}

// The 4 rows' parts; each input vec4 is loaded once for the 4 rows.
fn rows_dot4(blk: vec4<u32>, unit: u32, part: u32, xb: u32) -> vec4<f32> {
    let bi = blk / BLOCK_BYTES;
    // Lanes a part of the 8-lane layout (1 or 2), words of its loads a lane, the 8-lane
    // part p8 it shares, and its first word.
    let sub = PARTS / 8u;
    let words = 4u / sub;
    let p8 = part / sub;
    let c0 = words * (part % sub);
    let n = p8 >> 2u;
    let h = (p8 >> 1u) & 1u;
    let j = p8 & 1u;
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
    let xo = xb + 128u * n + 32u * j + 16u * h + 4u * c0;
    let j2 = 2u * j;
    var s0 = vec2<f32>(0.0);
    var s1 = vec2<f32>(0.0);
    var s2 = vec2<f32>(0.0);
    var s3 = vec2<f32>(0.0);
    for (var c = 0u; c < words; c++) {
        let k = c0 + c;
        let xl = x4(xo + 4u * c);
        let xh = x4(xo + 64u + 4u * c);
        s0 += q6_k_pair(a0[k], h0[k], j2, xl, xh);
        s1 += q6_k_pair(a1[k], h1[k], j2, xl, xh);
        s2 += q6_k_pair(a2[k], h2[k], j2, xl, xh);
        s3 += q6_k_pair(a3[k], h3[k], j2, xl, xh);
    }
    return d * vec4<f32>(dot(sc0, s0), dot(sc1, s1), dot(sc2, s2), dot(sc3, s3));
}
