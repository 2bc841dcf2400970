// Matvec inner loop for Q5_1 with an int8 input (matvec/x_q8.wgsl): the lane layout and loads
// of dot_q5_1.wgsl (PARTS = 4 lanes per block, part i = word i of nibbles: 4 low and 4 high
// codes; matvec/rows_each.wgsl calls it per row). Integer sums sum q x (codes 0..31) and
// sum x, exact; then d_x (d sum q x + m sum x).
const PARTS: u32 = 4u;
const STEP_UNITS: u32 = 1u;

fn part_dot(blk: u32, unit: u32, part: u32, xb: u32) -> f32 {
    let c = q5_codes(load_u32(blk + 8u + 4u * part), load_u32(blk + 4u), part);
    let xl = xq4(xb + 4u * part);
    let xh = xq4(xb + 16u + 4u * part);
    let s = dot4I8Packed(c.x, xl) + dot4I8Packed(c.y, xh);
    let sx = dot4I8Packed(0x01010101u, xl) + dot4I8Packed(0x01010101u, xh);
    return xd(xb) * (load_f16(blk) * f32(s) + load_f16(blk + 2u) * f32(sx));
}
