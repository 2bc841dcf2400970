// Q6_K: 210 bytes per 256 weights = ql[128] (low 4 bits), qh[64] (high 2 bits), int8 scales[16]
// (one per 16 weights), f16 d. Weights come in two halves of 128; in half n, quarter k (32
// weights, our unit u = 4n + k) takes ql[64n + 32(k%2) + l] >> 4(k/2), qh[32n + l] >> 2k and
// scale[8n + 2k + l/16]. w = d * scale * (q - 32).
const BLOCK_BYTES: u32 = 210u;
const BLOCK_UNITS: u32 = 8u;

fn decode_unit(blk: u32, unit: u32) {
    let n = unit >> 2u;
    let k = unit & 3u;
    let d = load_f16(blk + 208u);
    let ql = blk + 64u * n + 32u * (k & 1u);
    let ql_shift = 4u * (k >> 1u);
    let qh = blk + 128u + 32u * n;
    let qh_shift = 2u * k;
    let sc = blk + 192u + 8u * n + 2u * k;
    let d0 = d * f32(sbyte(load_u8(sc), 0u));
    let d1 = d * f32(sbyte(load_u8(sc + 1u), 0u));
    for (var i = 0u; i < 8u; i++) {
        let lo = load_u32(ql + 4u * i) >> ql_shift;
        let hi = load_u32(qh + 4u * i) >> qh_shift;
        let dl = select(d1, d0, i < 4u);
        for (var b = 0u; b < 4u; b++) {
            let q = (ubyte(lo, b) & 0xfu) | ((ubyte(hi, b) & 3u) << 4u);
            unit_w[4u * i + b] = dl * f32(i32(q) - 32);
        }
    }
}
