// Q4_K: 144 bytes per 256 weights = f16 d, f16 dmin, 12 bytes of packed 6-bit (scale, min) for
// 8 sub-blocks of 32 (formats/scale_min_k4.wgsl), 128 bytes of nibbles. Sub-block u uses bytes
// 32*(u/2).. of qs, low nibbles when u is even, high when odd. w = d * sc[u] * q - dmin * m[u].
const BLOCK_BYTES: u32 = 144u;
const BLOCK_UNITS: u32 = 8u;

fn decode_unit(blk: u32, unit: u32) {
    let sm = scale_min_k4(blk + 4u, unit);
    // Formed as the quant crate forms them (d * sc, dmin * m), so the weights match exactly.
    let d1 = load_f16(blk) * sm.x;
    let m1 = load_f16(blk + 2u) * sm.y;
    let shift = 4u * (unit & 1u);
    let qs = blk + 16u + 32u * (unit >> 1u);
    for (var i = 0u; i < 8u; i++) {
        let q = load_u32(qs + 4u * i) >> shift;
        for (var k = 0u; k < 4u; k++) {
            unit_w[4u * i + k] = d1 * f32(ubyte(q, k) & 0xfu) - m1;
        }
    }
}
