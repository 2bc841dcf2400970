// Q4_1: 20 bytes = f16 d, f16 m, 16 bytes of nibbles (low nibbles: weights 0..15, high: 16..31).
// w = d * q + m.
const BLOCK_BYTES: u32 = 20u;
const BLOCK_UNITS: u32 = 1u;

fn decode_unit(blk: u32, unit: u32) {
    let d = load_f16(blk);
    let m = load_f16(blk + 2u);
    for (var i = 0u; i < 4u; i++) {
        let q = load_u32(blk + 4u + 4u * i);
        for (var k = 0u; k < 4u; k++) {
            let b = ubyte(q, k);
            unit_w[4u * i + k] = d * f32(b & 0xfu) + m;
            unit_w[16u + 4u * i + k] = d * f32(b >> 4u) + m;
        }
    }
}
