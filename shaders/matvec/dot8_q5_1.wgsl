// Matvec inner loop for Q5_1 with a q8 input (matvec/x_q8.wgsl): the lane layout and loads
// of dot_q5_1.wgsl (PARTS = 4 lanes per block, part i = word i of nibbles: 4 low and 4 high
// codes; matvec/rows_each.wgsl calls it per row). Integer sums over both input digits
// (`dot8`): sum q x (codes 0..31) and sum x, exact; then d_x / 254 (d sum q x + m sum x).
const PARTS: u32 = 4u;
const SLICE_UNITS: u32 = 1u;

fn part_dot(blk: u32, unit: u32, part: u32, xb: u32) -> f32 {
    let c = q5_codes(load_u32(blk + 8u + 4u * part), load_u32(blk + 4u), part);
    let il = xb + 4u * part;
    let ih = xb + 16u + 4u * part;
    let l1 = xq4(il);
    let l2 = xq4_lo(il);
    let h1 = xq4(ih);
    let h2 = xq4_lo(ih);
    let s = dot8(c.x, l1, l2) + dot8(c.y, h1, h2);
    let sx = dot8(0x01010101u, l1, l2) + dot8(0x01010101u, h1, h2);
    return xd(xb) * (load_f16(blk) * f32(s) + load_f16(blk + 2u) * f32(sx));
}
