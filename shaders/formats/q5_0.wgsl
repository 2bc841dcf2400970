// Q5_0: 22 bytes = f16 d, u32 qh (fifth bits), 16 bytes of nibbles. Weight j < 16: low nibble
// of byte j with bit j of qh; weight j + 16: high nibble with bit j + 16. w = d * (q - 16).
const BLOCK_BYTES: u32 = 22u;
const BLOCK_UNITS: u32 = 1u;

fn decode_unit(blk: u32, unit: u32) {
    let d = load_f16(blk);
    let qh = load_u32(blk + 2u);
    for (var i = 0u; i < 4u; i++) {
        let q = load_u32(blk + 6u + 4u * i);
        for (var k = 0u; k < 4u; k++) {
            let j = 4u * i + k;
            let b = ubyte(q, k);
            let lo = (b & 0xfu) | (((qh >> j) & 1u) << 4u);
            let hi = (b >> 4u) | (((qh >> (j + 16u)) & 1u) << 4u);
            unit_w[j] = d * f32(i32(lo) - 16);
            unit_w[j + 16u] = d * f32(i32(hi) - 16);
        }
    }
}
