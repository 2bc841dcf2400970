// Matvec part for Q5_0 (planes: 16 bytes of nibbles per block, qh, f16 d): one lane per block,
// one vec4 load of its nibbles per row; d * sum (q - 16) x, codes from formats/q5_codes.wgsl,
// each input loaded once for the 4 rows.
const PARTS: u32 = 1u;
const SLICE_UNITS: u32 = 1u;

// Row `q`'s codes k (word k of nibbles with its fifth bits) dotted with the inputs.
fn q5_0_dot(q: vec4<u32>, qh: u32, k: u32, xl: vec4<f32>, xh: vec4<f32>) -> f32 {
    let c = q5_codes(q[k], qh, k);
    return dot(vec4<f32>(unpack4xU8(c.x)) - 16.0, xl) + dot(vec4<f32>(unpack4xU8(c.y)) - 16.0, xh);
}

fn rows_dot4(blk: vec4<u32>, unit: u32, part: u32, xb: u32) -> vec4<f32> {
    let bi = blk / BLOCK_BYTES;
    let q0 = w[1u + bi.x];
    let q1 = w[1u + bi.y];
    let q2 = w[1u + bi.z];
    let q3 = w[1u + bi.w];
    let qh = vec4<u32>(plane_u32(1u, bi.x), plane_u32(1u, bi.y), plane_u32(1u, bi.z), plane_u32(1u, bi.w));
    var s = vec4<f32>(0.0);
    for (var k = 0u; k < 4u; k++) {
        let xl = x4(xb + 4u * k);
        let xh = x4(xb + 16u + 4u * k);
        s += vec4<f32>(
            q5_0_dot(q0, qh.x, k, xl, xh),
            q5_0_dot(q1, qh.y, k, xl, xh),
            q5_0_dot(q2, qh.z, k, xl, xh),
            q5_0_dot(q3, qh.w, k, xl, xh),
        );
    }
    let d = vec4<f32>(plane_f16(2u, bi.x), plane_f16(2u, bi.y), plane_f16(2u, bi.z), plane_f16(2u, bi.w));
    return d * s;
}
