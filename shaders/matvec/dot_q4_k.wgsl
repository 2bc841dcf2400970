// Matvec part for Q4_K (GGUF layout: 144-byte super-blocks are 9 vec4s, so blocks stay 16-byte
// aligned and need no planes): a slice is a whole super-block (8 units) taken by PARTS = 8
// neighbouring lanes, or 16 (`ops::matvec::lanes` overrides PARTS for a product of few
// rows short enough that the 16 still take one slice each: half the chain a lane). With 8,
// lane j (g = j / 2, h = j % 2) loads one vec4, bytes 32g + 16h .. + 16 of the 128 bytes of
// nibbles: positions 16h .. 16h + 15 of unit 2g (low nibbles) and of unit 2g + 1 (high
// nibbles); with 16, lanes 2j and 2j + 1 take words 0, 1 and 2, 3 of lane j's vec4. The
// first vec4 holds f16 d, f16 dmin and the 12 bytes of packed 6-bit (scale, min)
// (formats/scales_k4.wgsl); `q4_k_row` (formats/q4_k.wgsl) applies them to each lane's sums
// (it is linear in them). w = d * sc * q - dmin * m.
override PARTS: u32 = 8u;
const SLICE_UNITS: u32 = 8u;

// The 4 rows' parts; each input vec4 is loaded once for the 4 rows.
fn rows_dot4(blk: vec4<u32>, unit: u32, part: u32, xb: u32) -> vec4<f32> {
    let base = blk >> vec4<u32>(4u);
    // Lanes a vec4 of nibbles (1 or 2), its words a lane, and the lane's first word.
    let sub = PARTS / 8u;
    let words = 4u / sub;
    let j = part / sub;
    let w0 = words * (part % sub);
    let g = j >> 1u;
    let q0 = w[base.x + 1u + j];
    let q1 = w[base.y + 1u + j];
    let q2 = w[base.z + 1u + j];
    let q3 = w[base.w + 1u + j];
    let xo = xb + 64u * g + 16u * (j & 1u) + 4u * w0;
    var qa = vec4<f32>(0.0);
    var qb = vec4<f32>(0.0);
    // The inputs' sums (for the mins) as scalars: 6 registers fewer than vec4 sums, and the
    // kernel is register-bound (docs/PERF.md, D-q4k-scalar-sums).
    var sa = 0.0;
    var sb = 0.0;
    for (var c = 0u; c < words; c++) {
        let k = w0 + c;
        let xa = x4(xo + 4u * c);
        let xc = x4(xo + 32u + 4u * c);
        sa += (xa.x + xa.y) + (xa.z + xa.w);
        sb += (xc.x + xc.y) + (xc.z + xc.w);
        qa += vec4<f32>(dot(nibbles4(q0[k], 0u), xa), dot(nibbles4(q1[k], 0u), xa), dot(nibbles4(q2[k], 0u), xa), dot(nibbles4(q3[k], 0u), xa));
        qb += vec4<f32>(dot(nibbles4(q0[k], 4u), xc), dot(nibbles4(q1[k], 4u), xc), dot(nibbles4(q2[k], 4u), xc), dot(nibbles4(q3[k], 4u), xc));
    }
    let sxa = sa;
    let sxb = sb;
    return vec4<f32>(
        q4_k_row(w[base.x], g, qa.x, qb.x, sxa, sxb),
        q4_k_row(w[base.y], g, qa.y, qb.y, sxa, sxb),
        q4_k_row(w[base.z], g, qa.z, qb.z, sxa, sxb),
        q4_k_row(w[base.w], g, qa.w, qb.w, sxa, sxb),
    );
}
