// Q4_K: 144 bytes per 256 weights = f16 d, f16 dmin, 12 bytes of packed 6-bit (scale, min) for
// 8 sub-blocks of 32, 128 bytes of nibbles. Sub-block u uses bytes 32*(u/2).. of qs, low
// nibbles when u is even, high when odd. w = d * sc[u] * q - dmin * m[u].
const BLOCK_BYTES: u32 = 144u;
const BLOCK_UNITS: u32 = 8u;

fn decode_unit(blk: u32, unit: u32) {
    let d = load_f16(blk);
    let dmin = load_f16(blk + 2u);
    let s = blk + 4u;
    var sc: u32;
    var m: u32;
    if unit < 4u {
        sc = load_u8(s + unit) & 63u;
        m = load_u8(s + unit + 4u) & 63u;
    } else {
        sc = (load_u8(s + unit + 4u) & 0xfu) | ((load_u8(s + unit - 4u) >> 6u) << 4u);
        m = (load_u8(s + unit + 4u) >> 4u) | ((load_u8(s + unit) >> 6u) << 4u);
    }
    let d1 = d * f32(sc);
    let m1 = dmin * f32(m);
    let shift = 4u * (unit & 1u);
    let qs = blk + 16u + 32u * (unit >> 1u);
    for (var i = 0u; i < 8u; i++) {
        let q = load_u32(qs + 4u * i) >> shift;
        for (var k = 0u; k < 4u; k++) {
            unit_w[4u * i + k] = d1 * f32(ubyte(q, k) & 0xfu) - m1;
        }
    }
}
