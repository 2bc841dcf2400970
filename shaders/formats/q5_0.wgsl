// Q5_0: 22 bytes = f16 d, u32 qh (fifth bits), 16 bytes of nibbles; codes as in
// formats/q5_codes.wgsl. w = d * (q - 16).
const BLOCK_BYTES: u32 = 22u;
const BLOCK_UNITS: u32 = 1u;

fn decode_unit(blk: u32, unit: u32) {
    let d = load_f16(blk);
    let qh = load_u32(blk + 2u);
    for (var i = 0u; i < 4u; i++) {
        let c = q5_codes(load_u32(blk + 6u + 4u * i), qh, i);
        for (var k = 0u; k < 4u; k++) {
            unit_w[4u * i + k] = d * f32(i32(ubyte(c.x, k)) - 16);
            unit_w[16u + 4u * i + k] = d * f32(i32(ubyte(c.y, k)) - 16);
        }
    }
}
