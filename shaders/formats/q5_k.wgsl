// Q5_K: 176 bytes per 256 weights = Q4_K's layout (f16 d, f16 dmin, 12 bytes of packed 6-bit
// (scale, min), regrouped at upload: formats/scales_k4.wgsl) with 32 bytes of fifth bits qh
// before the 128 bytes of nibbles qs: weight l of unit u (32 weights) is nibble u % 2 of
// qs[32 (u / 2) + l] with bit u of qh[l] as its fifth bit. w = (d * sc[u]) * q - dmin * m[u].
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

// A half unit (`decode_half`, formats/decode_half.wgsl): weights 16h .. 16h + 15 of unit `unit`
// (h = 0, 1), as 4 vec4s: the tiled matmul's share of a unit (two invocations decode one row's
// unit). Super-blocks are 11 vec4s and stay 16-byte aligned: header, fifth bits and nibbles are
// one vec4 load each.
//
// The loaded words of a half: the super-block's header, the vec4 of nibbles and that of fifth
// bits.
struct RawHalf {
    head: vec4<u32>,
    q: vec4<u32>,
    qh: vec4<u32>,
}

fn load_half_raw(blk: u32, unit: u32, h: u32) -> RawHalf {
    let b = blk >> 4u;
    return RawHalf(w[b], w[b + 3u + 2u * (unit >> 1u) + h], w[b + 1u + h]);
}

fn decode_raw(r: RawHalf, unit: u32, h: u32) -> array<vec4<f32>, 4> {
    let sm = scale_min_k4_words(r.head.yzw, unit);
    let dm = unpack2x16float(r.head.x);
    // Formed as the quant crate forms them (d * sc, dmin * m), so the weights match exactly.
    let d1 = dm.x * sm.x;
    let m1 = dm.y * sm.y;
    let q = (r.q >> vec4<u32>(4u * (unit & 1u))) & vec4<u32>(0x0f0f0f0fu);
    let hb = (r.qh >> vec4<u32>(unit)) & vec4<u32>(0x01010101u);
    let c = q | (hb << vec4<u32>(4u));
    // One expression a quad, not a loop over an array: an array indexed in a loop may live in
    // local memory (docs/PERF.md, D-named-registers).
    return array<vec4<f32>, 4>(
        d1 * vec4<f32>(unpack4xU8(c.x)) - m1,
        d1 * vec4<f32>(unpack4xU8(c.y)) - m1,
        d1 * vec4<f32>(unpack4xU8(c.z)) - m1,
        d1 * vec4<f32>(unpack4xU8(c.w)) - m1,
    );
}
