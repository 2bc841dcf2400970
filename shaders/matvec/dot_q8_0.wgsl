// Matvec part for Q8_0 (planes: 32 bytes of q per block, then f16 d): a block is 2 parts of 16
// weights, one vec4 load of q each, so neighbouring lanes read neighbouring 16 bytes.
const PARTS: u32 = 2u;
const STEP_UNITS: u32 = 1u;

// The part's 16 inputs, loaded once for the R rows.
alias PartX = array<vec4<f32>, 4>;

fn part_x(part: u32, xb: u32) -> PartX {
    let o = xb + 16u * part;
    return PartX(x4(o), x4(o + 4u), x4(o + 8u), x4(o + 12u));
}

fn part_dot(blk: u32, unit: u32, part: u32, xv: PartX) -> f32 {
    let bi = blk / BLOCK_BYTES;
    let q = w[1u + 2u * bi + part];
    let s = dot(vec4<f32>(unpack4xI8(q.x)), xv[0]) + dot(vec4<f32>(unpack4xI8(q.y)), xv[1])
        + dot(vec4<f32>(unpack4xI8(q.z)), xv[2]) + dot(vec4<f32>(unpack4xI8(q.w)), xv[3]);
    return plane_f16(1u, bi) * s;
}
