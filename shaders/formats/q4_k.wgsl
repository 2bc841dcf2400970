// Q4_K: 144 bytes per 256 weights = f16 d, f16 dmin, 12 bytes of packed 6-bit (scale, min) for
// 8 sub-blocks of 32 (regrouped at upload: formats/scales_k4.wgsl), 128 bytes of nibbles.
// Sub-block u uses bytes 32*(u/2).. of qs, low nibbles when u is even, high when odd.
// w = d * sc[u] * q - dmin * m[u].
const BLOCK_BYTES: u32 = 144u;
const BLOCK_UNITS: u32 = 8u;

// A matvec row's part of units 2g and 2g + 1 from its sums over their inputs: qa, qb =
// sum q x, sa, sb = sum x; `head` is the super-block's first vec4 (d, dmin, packed scales).
// Shared by the f32 and the int8-input dot files (matvec/dot_q4_k.wgsl, dot8_q4_k.wgsl).
fn q4_k_row(head: vec4<u32>, g: u32, qa: f32, qb: f32, sa: f32, sb: f32) -> f32 {
    let s = scales_k4_pair(head.yzw, g);
    let dm = unpack2x16float(head.x);
    return dm.x * (s.x * qa + s.y * qb) - dm.y * (s.z * sa + s.w * sb);
}

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

// A half unit (`decode_half`, formats/decode_half.wgsl): weights 16h .. 16h + 15 of unit `unit`
// (h = 0, 1), as 4 vec4s: the tiled matmul's share of a unit (two invocations decode one row's
// unit). Super-blocks are 9 vec4s and stay 16-byte aligned, so the header (d, dmin, packed
// scales) and the 16 bytes of nibbles are one vec4 load each.
//
// The loaded words of a half: the super-block's header and the vec4 of nibbles.
struct RawHalf {
    head: vec4<u32>,
    q: vec4<u32>,
}

fn load_half_raw(blk: u32, unit: u32, h: u32) -> RawHalf {
    return RawHalf(w[blk >> 4u], w[(blk >> 4u) + 1u + 2u * (unit >> 1u) + h]);
}

fn decode_raw(r: RawHalf, unit: u32, h: u32) -> array<vec4<f32>, 4> {
    let sm = scale_min_k4_words(r.head.yzw, unit);
    let dm = unpack2x16float(r.head.x);
    // Formed as the quant crate forms them (d * sc, dmin * m), so the weights match exactly.
    let d1 = dm.x * sm.x;
    let m1 = dm.y * sm.y;
    let q = (r.q >> vec4<u32>(4u * (unit & 1u))) & vec4<u32>(0x0f0f0f0fu);
    // One expression a quad, not a loop over an array: an array indexed in a loop may live in
    // local memory (docs/PERF.md, D-named-registers).
    return array<vec4<f32>, 4>(
        d1 * vec4<f32>(unpack4xU8(q.x)) - m1,
        d1 * vec4<f32>(unpack4xU8(q.y)) - m1,
        d1 * vec4<f32>(unpack4xU8(q.z)) - m1,
        d1 * vec4<f32>(unpack4xU8(q.w)) - m1,
    );
}
