// Q4_0: 18 bytes = f16 d, 16 bytes of nibbles. Weight j < 16 is the low nibble of byte j,
// weight j + 16 the high nibble. w = d * (q - 8).
const BLOCK_BYTES: u32 = 18u;
const BLOCK_UNITS: u32 = 1u;

fn decode_unit(blk: u32, unit: u32) {
    let d = load_f16(blk);
    for (var i = 0u; i < 4u; i++) {
        let q = load_u32(blk + 2u + 4u * i);
        for (var k = 0u; k < 4u; k++) {
            let b = ubyte(q, k);
            unit_w[4u * i + k] = d * (f32(b & 0xfu) - 8.0);
            unit_w[16u + 4u * i + k] = d * (f32(b >> 4u) - 8.0);
        }
    }
}
