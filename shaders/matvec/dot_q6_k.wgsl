// Matvec part for Q6_K (planes: ql then qh, 12 vec4s per super-block; the 16 int8 scales; d):
// a step is a whole super-block (8 units) taken by PARTS = 4 neighbouring lanes. Lane
// (n = part / 2, h = part % 2) takes positions l = 16h .. 16h + 15 of the four quarters of half
// n: three vec4 loads, ql bytes 64n + 16h (low nibbles: quarter 0, high: quarter 2), ql bytes
// 64n + 32 + 16h (quarters 1 and 3) and qh bytes 32n + 16h (2 bits for each quarter), i.e. 64
// weights. Quarter k of that range has the single scale 8n + 2k + h.
const PARTS: u32 = 4u;
const STEP_UNITS: u32 = 8u;

// The part's 64 inputs, loaded once for the R rows: q[k][c] = x[128n + 32k + 16h + 4c ..],
// quarter k of half n at the lane's 16 positions.
alias PartX = array<array<vec4<f32>, 4>, 4>;

fn part_x(part: u32, xb: u32) -> PartX {
    let xo = xb + 128u * (part >> 1u) + 16u * (part & 1u);
    var v: PartX;
    for (var k = 0u; k < 4u; k++) {
        for (var c = 0u; c < 4u; c++) {
            v[k][c] = x4(xo + 32u * k + 4u * c);
        }
    }
    return v;
}

fn part_dot(blk: u32, unit: u32, part: u32, xv: PartX) -> f32 {
    let bi = blk / BLOCK_BYTES;
    let n = part >> 1u;
    let h = part & 1u;
    let base = 1u + 12u * bi;
    let a = w[base + 4u * n + h];
    let b = w[base + 4u * n + 2u + h];
    let hb = w[base + 8u + 2u * n + h];
    let sc = w[plane_start(1u) + bi];
    var s = vec4<f32>(0.0);
    for (var c = 0u; c < 4u; c++) {
        let q0 = (a[c] & 0x0f0f0f0fu) | ((hb[c] & 0x03030303u) << 4u);
        let q1 = (b[c] & 0x0f0f0f0fu) | (((hb[c] >> 2u) & 0x03030303u) << 4u);
        let q2 = ((a[c] >> 4u) & 0x0f0f0f0fu) | (((hb[c] >> 4u) & 0x03030303u) << 4u);
        let q3 = ((b[c] >> 4u) & 0x0f0f0f0fu) | (((hb[c] >> 6u) & 0x03030303u) << 4u);
        s += vec4<f32>(
            dot(vec4<f32>(unpack4xU8(q0)) - 32.0, xv[0][c]),
            dot(vec4<f32>(unpack4xU8(q1)) - 32.0, xv[1][c]),
            dot(vec4<f32>(unpack4xU8(q2)) - 32.0, xv[2][c]),
            dot(vec4<f32>(unpack4xU8(q3)) - 32.0, xv[3][c]),
        );
    }
    let scales = vec4<f32>(
        q6_k_scale(sc, 8u * n + h),
        q6_k_scale(sc, 8u * n + 2u + h),
        q6_k_scale(sc, 8u * n + 4u + h),
        q6_k_scale(sc, 8u * n + 6u + h),
    );
    return plane_f16(2u, bi) * dot(scales, s);
}
