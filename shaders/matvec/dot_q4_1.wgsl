// Matvec part for Q4_1 (planes: 16 bytes of nibbles per block, then the (d, m) word): one lane
// per block, one vec4 load of its nibbles per row; d * sum q x + m * sum x, each input loaded
// once for the 4 rows.
const PARTS: u32 = 1u;
const SLICE_UNITS: u32 = 1u;

fn rows_dot4(blk: vec4<u32>, unit: u32, part: u32, xb: u32) -> vec4<f32> {
    let bi = blk / BLOCK_BYTES;
    let q0 = w[1u + bi.x];
    let q1 = w[1u + bi.y];
    let q2 = w[1u + bi.z];
    let q3 = w[1u + bi.w];
    var s = vec4<f32>(0.0);
    var sx = vec4<f32>(0.0);
    for (var k = 0u; k < 4u; k++) {
        let xl = x4(xb + 4u * k);
        let xh = x4(xb + 16u + 4u * k);
        sx += xl + xh;
        s += vec4<f32>(
            dot(nibbles4(q0[k], 0u), xl) + dot(nibbles4(q0[k], 4u), xh),
            dot(nibbles4(q1[k], 0u), xl) + dot(nibbles4(q1[k], 4u), xh),
            dot(nibbles4(q2[k], 0u), xl) + dot(nibbles4(q2[k], 4u), xh),
            dot(nibbles4(q3[k], 0u), xl) + dot(nibbles4(q3[k], 4u), xh),
        );
    }
    let m0 = unpack2x16float(plane_u32(1u, bi.x));
    let m1 = unpack2x16float(plane_u32(1u, bi.y));
    let m2 = unpack2x16float(plane_u32(1u, bi.z));
    let m3 = unpack2x16float(plane_u32(1u, bi.w));
    let sum_x = dot(sx, vec4<f32>(1.0));
    return vec4<f32>(m0.x, m1.x, m2.x, m3.x) * s + vec4<f32>(m0.y, m1.y, m2.y, m3.y) * sum_x;
}
