// Matvec part for F32 rows: a unit of 32 weights is 8 parts of 4 words; lane `part` of a
// group of PARTS neighbouring lanes dots part `part`. Rows start 4-byte aligned.

fn f32_part(b: u32, i: u32, xb: u32) -> f32 {
    let k = (b >> 2u) + 4u * i;
    let wv = vec4<f32>(bitcast<f32>(wd(k)), bitcast<f32>(wd(k + 1u)), bitcast<f32>(wd(k + 2u)), bitcast<f32>(wd(k + 3u)));
    return dot(wv, x4(xb + 4u * i));
}

const PARTS: u32 = 8u;
const SLICE_UNITS: u32 = 1u;

fn part_dot(blk: u32, unit: u32, part: u32, xb: u32) -> f32 {
    return f32_part(blk, part, xb);
}
