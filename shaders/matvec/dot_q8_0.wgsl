// Matvec part for Q8_0 (planes: 32 bytes of q per block, then f16 d): a block is PARTS = 2
// parts of 16 weights, one vec4 load of q each, so neighbouring lanes read neighbouring 16
// bytes; or 4 parts of 8 (`ops::matvec::lanes` overrides PARTS for a product of few, short
// rows: half the chain a lane), lanes 2v and 2v + 1 then taking words 0-1 and 2-3 of vec4 v.
// Each input vec4 is loaded once and used for the 4 rows.
override PARTS: u32 = 2u;
const SLICE_UNITS: u32 = 1u;

fn rows_dot4(blk: vec4<u32>, unit: u32, part: u32, xb: u32) -> vec4<f32> {
    let bi = blk / BLOCK_BYTES;
    // Words of q a lane (4 or 2), and where its first lies: vec4 v of the block's two, word o.
    let words = 8u / PARTS;
    let first = part * words;
    let v = first / 4u;
    let o = first % 4u;
    let q0 = w[1u + 2u * bi.x + v];
    let q1 = w[1u + 2u * bi.y + v];
    let q2 = w[1u + 2u * bi.z + v];
    let q3 = w[1u + 2u * bi.w + v];
    let xo = xb + 4u * first;
    var s = vec4<f32>(0.0);
    for (var c = 0u; c < words; c++) {
        let k = o + c;
        let xc = x4(xo + 4u * c);
        s += vec4<f32>(
            dot(vec4<f32>(unpack4xI8(q0[k])), xc),
            dot(vec4<f32>(unpack4xI8(q1[k])), xc),
            dot(vec4<f32>(unpack4xI8(q2[k])), xc),
            dot(vec4<f32>(unpack4xI8(q3[k])), xc),
        );
    }
    let d = vec4<f32>(plane_f16(1u, bi.x), plane_f16(1u, bi.y), plane_f16(1u, bi.z), plane_f16(1u, bi.w));
    return d * s;
}
