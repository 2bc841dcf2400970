// Q5_K: 176 bytes per 256 weights = Q4_K's layout (f16 d, f16 dmin, 12 bytes of packed 6-bit
// (scale, min), see formats/scale_min_k4.wgsl) with 32 bytes of fifth bits qh before the 128
// bytes of nibbles qs: weight l of unit u (32 weights) is nibble u % 2 of qs[32 (u / 2) + l]
// with bit u of qh[l] as its fifth bit. w = (d * sc[u]) * q - dmin * m[u].
const BLOCK_BYTES: u32 = 176u;
const BLOCK_UNITS: u32 = 8u;

fn decode_unit(blk: u32, unit: u32) {
    let sm = scale_min_k4(blk + 4u, unit);
    // Formed as the quant crate forms them (d * sc, dmin * m), so the weights match exactly.
    let d1 = load_f16(blk) * sm.x;
    let m1 = load_f16(blk + 2u) * sm.y;
    let shift = 4u * (unit & 1u);
    let qs = blk + 48u + 32u * (unit >> 1u);
    for (var i = 0u; i < 8u; i++) {
        let q = load_u32(qs + 4u * i) >> shift;
        let h = load_u32(blk + 16u + 4u * i) >> unit;
        for (var k = 0u; k < 4u; k++) {
            let c = (ubyte(q, k) & 0xfu) | ((ubyte(h, k) & 1u) << 4u);
            unit_w[4u * i + k] = d1 * f32(c) - m1;
        }
    }
}
