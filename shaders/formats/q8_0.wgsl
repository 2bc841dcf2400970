// Q8_0: 34 bytes = f16 d, 32 x int8 q. w = d * q.
const BLOCK_BYTES: u32 = 34u;
const BLOCK_UNITS: u32 = 1u;

fn decode_unit(blk: u32, unit: u32) {
    let d = load_f16(blk);
    for (var i = 0u; i < 8u; i++) {
        let q = load_u32(blk + 2u + 4u * i);
        for (var k = 0u; k < 4u; k++) {
            unit_w[4u * i + k] = d * f32(sbyte(q, k));
        }
    }
}
