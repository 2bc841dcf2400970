// Matvec part for Q8_0 (planes: 32 bytes of q per block, then f16 d): a block is 2 parts of 16
// weights, one vec4 load of q each, so neighbouring lanes read neighbouring 16 bytes. Each
// input vec4 is loaded once and used for the 4 rows.
const PARTS: u32 = 2u;
const STEP_UNITS: u32 = 1u;

fn rows_dot4(blk: vec4<u32>, unit: u32, part: u32, xb: u32) -> vec4<f32> {
    let bi = blk / BLOCK_BYTES;
    let q0 = w[1u + 2u * bi.x + part];
    let q1 = w[1u + 2u * bi.y + part];
    let q2 = w[1u + 2u * bi.z + part];
    let q3 = w[1u + 2u * bi.w + part];
    let xo = xb + 16u * part;
    var s = vec4<f32>(0.0);
    for (var c = 0u; c < 4u; c++) {
        let xc = x4(xo + 4u * c);
        s += vec4<f32>(
            dot(vec4<f32>(unpack4xI8(q0[c])), xc),
            dot(vec4<f32>(unpack4xI8(q1[c])), xc),
            dot(vec4<f32>(unpack4xI8(q2[c])), xc),
            dot(vec4<f32>(unpack4xI8(q3[c])), xc),
        );
    }
    let d = vec4<f32>(plane_f16(1u, bi.x), plane_f16(1u, bi.y), plane_f16(1u, bi.z), plane_f16(1u, bi.w));
    return d * s;
}
