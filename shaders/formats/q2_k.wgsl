// Q2_K: 84 bytes per 256 weights = 16 bytes of (scale, min) nibbles (one byte per 16 weights:
// scale low, min high), 64 bytes of 2-bit levels, f16 d, f16 dmin. Each half n of 128 weights
// uses 32 bytes of qs: byte l holds weights l, l + 32, l + 64, l + 96 of the half, lowest bits
// first, so unit u = 4n + k (32 weights) is bits 2k..2k+1 of qs[32n .. 32n + 32].
// w = (d * sc) * q - dmin * m.
const BLOCK_BYTES: u32 = 84u;
const BLOCK_UNITS: u32 = 8u;

// (d * sc, dmin * m) of sub-block `s` (0..15, 16 weights), formed as the quant crate forms them.
fn q2_k_scale_min(blk: u32, s: u32) -> vec2<f32> {
    let b = load_u8(blk + s);
    return vec2<f32>(load_f16(blk + 80u) * f32(b & 0xfu), load_f16(blk + 82u) * f32(b >> 4u));
}

fn decode_unit(blk: u32, unit: u32) {
    let qs = blk + 16u + 32u * (unit >> 2u);
    let shift = 2u * (unit & 3u);
    let a = q2_k_scale_min(blk, 2u * unit);
    let b = q2_k_scale_min(blk, 2u * unit + 1u);
    for (var i = 0u; i < 8u; i++) {
        let q = load_u32(qs + 4u * i) >> shift;
        let sm = select(b, a, i < 4u);
        for (var k = 0u; k < 4u; k++) {
            unit_w[4u * i + k] = sm.x * f32(ubyte(q, k) & 3u) - sm.y;
        }
    }
}

// Weights 16h .. 16h + 15 of unit `unit` (h = 0, 1: one sub-block of 16), as 4 vec4s: the
// tiled matmul's share of a unit (two invocations decode one row's unit).
fn decode_half(blk: u32, unit: u32, h: u32) -> array<vec4<f32>, 4> {
    let qs = blk + 16u + 32u * (unit >> 2u) + 16u * h;
    let shift = 2u * (unit & 3u);
    let sm = q2_k_scale_min(blk, 2u * unit + h);
    let q = (vec4<u32>(load_u32(qs), load_u32(qs + 4u), load_u32(qs + 8u), load_u32(qs + 12u)) >> vec4<u32>(shift)) & vec4<u32>(0x03030303u);
    // One expression a quad, not a loop over an array: an array indexed in a loop may live in
    // local memory (docs/PERF.md, D-named-registers).
    return array<vec4<f32>, 4>(
        sm.x * vec4<f32>(unpack4xU8(q.x)) - sm.y,
        sm.x * vec4<f32>(unpack4xU8(q.y)) - sm.y,
        sm.x * vec4<f32>(unpack4xU8(q.z)) - sm.y,
        sm.x * vec4<f32>(unpack4xU8(q.w)) - sm.y,
    );
}
