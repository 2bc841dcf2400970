// `rows_dot4` for dot files that define a one-row `part_dot`: the 4 rows one after another,
// each reading its inputs through x4 (the L1 cache serves the repeats). The formats that
// decode millions of blocks per token define `rows_dot4` themselves and load each input once
// for the 4 rows (compilers do not merge the same loads across calls).
fn rows_dot4(blk: vec4<u32>, unit: u32, part: u32, xb: u32) -> vec4<f32> {
    return vec4<f32>(
        part_dot(blk.x, unit, part, xb),
        part_dot(blk.y, unit, part, xb),
        part_dot(blk.z, unit, part, xb),
        part_dot(blk.w, unit, part, xb),
    );
}
