// Matvec part for Q4_K with a q8 input (matvec/x_q8.wgsl): the lane layout and loads of
// dot_q4_k.wgsl (PARTS = 8 lanes per super-block; lane j, g = j / 2, h = j % 2, loads one
// vec4 of nibbles: positions 16h .. 16h + 15 of units 2g (low) and 2g + 1 (high)). Per unit
// the integer sums over both input digits (`dot8`), sum q x and sum x (for the min), are
// exact (and below 2^24: exact in f32 too); each unit is its own input block, so its
// d_x / 254 scales both before `q4_k_row` (formats/q4_k.wgsl) applies d * sc and dmin * m as
// in the f32 file.
const PARTS: u32 = 8u;
const SLICE_UNITS: u32 = 8u;

fn rows_dot4(blk: vec4<u32>, unit: u32, part: u32, xb: u32) -> vec4<f32> {
    let base = blk >> vec4<u32>(4u);
    let g = part >> 1u;
    let q0 = w[base.x + 1u + part];
    let q1 = w[base.y + 1u + part];
    let q2 = w[base.z + 1u + part];
    let q3 = w[base.w + 1u + part];
    let xo = xb + 64u * g + 16u * (part & 1u);
    let xa = xq16(xo);
    let xc = xq16(xo + 32u);
    let ya = xq16_lo(xo);
    let yc = xq16_lo(xo + 32u);
    var ia = vec4<i32>(0);
    var ib = vec4<i32>(0);
    var sa = 0;
    var sb = 0;
    for (var c = 0u; c < 4u; c++) {
        sa += dot8(0x01010101u, xa[c], ya[c]);
        sb += dot8(0x01010101u, xc[c], yc[c]);
        ia += vec4<i32>(
            dot8(q0[c] & 0x0f0f0f0fu, xa[c], ya[c]),
            dot8(q1[c] & 0x0f0f0f0fu, xa[c], ya[c]),
            dot8(q2[c] & 0x0f0f0f0fu, xa[c], ya[c]),
            dot8(q3[c] & 0x0f0f0f0fu, xa[c], ya[c]),
        );
        ib += vec4<i32>(
            dot8((q0[c] >> 4u) & 0x0f0f0f0fu, xc[c], yc[c]),
            dot8((q1[c] >> 4u) & 0x0f0f0f0fu, xc[c], yc[c]),
            dot8((q2[c] >> 4u) & 0x0f0f0f0fu, xc[c], yc[c]),
            dot8((q3[c] >> 4u) & 0x0f0f0f0fu, xc[c], yc[c]),
        );
    }
    let da = xd(xo);
    let db = xd(xo + 32u);
    let qa = da * vec4<f32>(ia);
    let qb = db * vec4<f32>(ib);
    let sxa = da * f32(sa);
    let sxb = db * f32(sb);
    return vec4<f32>(
        q4_k_row(w[base.x], g, qa.x, qb.x, sxa, sxb),
        q4_k_row(w[base.y], g, qa.y, qb.y, sxa, sxb),
        q4_k_row(w[base.z], g, qa.z, qb.z, sxa, sxb),
        q4_k_row(w[base.w], g, qa.w, qb.w, sxa, sxb),
    );
}
