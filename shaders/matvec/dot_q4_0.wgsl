// Matvec part for Q4_0 (planes: 16 bytes of nibbles per block, then f16 d): one lane per block,
// one vec4 load of its nibbles per row; d * sum (q - 8) x, each input loaded once for the 4
// rows. (Not sum q x - 8 sum x: the parity bound scales with sum |w x|, and q - 8 is exact.)
const PARTS: u32 = 1u;
const SLICE_UNITS: u32 = 1u;

fn rows_dot4(blk: vec4<u32>, unit: u32, part: u32, xb: u32) -> vec4<f32> {
    let bi = blk / BLOCK_BYTES;
    let q0 = w[1u + bi.x];
    let q1 = w[1u + bi.y];
    let q2 = w[1u + bi.z];
    let q3 = w[1u + bi.w];
    var s = vec4<f32>(0.0);
    for (var k = 0u; k < 4u; k++) {
        let xl = x4(xb + 4u * k);
        let xh = x4(xb + 16u + 4u * k);
        s += vec4<f32>(
            dot(nibbles4(q0[k], 0u) - 8.0, xl) + dot(nibbles4(q0[k], 4u) - 8.0, xh),
            dot(nibbles4(q1[k], 0u) - 8.0, xl) + dot(nibbles4(q1[k], 4u) - 8.0, xh),
            dot(nibbles4(q2[k], 0u) - 8.0, xl) + dot(nibbles4(q2[k], 4u) - 8.0, xh),
            dot(nibbles4(q3[k], 0u) - 8.0, xl) + dot(nibbles4(q3[k], 4u) - 8.0, xh),
        );
    }
    let d = vec4<f32>(plane_f16(1u, bi.x), plane_f16(1u, bi.y), plane_f16(1u, bi.z), plane_f16(1u, bi.w));
    return d * s;
}
