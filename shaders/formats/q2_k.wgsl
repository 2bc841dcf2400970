// Q2_K: 84 bytes per 256 weights = 16 bytes of (scale, min) nibbles (one byte per 16 weights:
// scale low, min high), 64 bytes of 2-bit levels, f16 d, f16 dmin. Each half n of 128 weights
// uses 32 bytes of qs: byte l holds weights l, l + 32, l + 64, l + 96 of the half, lowest bits
// first, so unit u = 4n + k (32 weights) is bits 2k..2k+1 of qs[32n .. 32n + 32].
// w = (d * sc) * q - dmin * m.
const BLOCK_BYTES: u32 = 84u;
const BLOCK_UNITS: u32 = 8u;

// (d * sc, dmin * m) of sub-block `s` (0..15, 16 weights), formed as the quant crate forms them.
fn q2_k_scale_min(blk: u32, s: u32) -> vec2<f32> {
    return q2_k_scale_min_of(wd((blk + s) >> 2u), q2_k_d_words(blk), blk, s);
}

// The words holding d and dmin (the same word where the block starts on a word boundary).
fn q2_k_d_words(blk: u32) -> vec2<u32> {
    return vec2<u32>(wd((blk + 80u) >> 2u), wd((blk + 82u) >> 2u));
}

// `q2_k_scale_min` from the words holding its fields: `sc` holds byte `s` of the block, `dw`
// are `q2_k_d_words`.
fn q2_k_scale_min_of(sc: u32, dw: vec2<u32>, blk: u32, s: u32) -> vec2<f32> {
    let b = byte_of(sc, blk + s);
    let d = f16_of(dw.x, blk + 80u);
    let dmin = f16_of(dw.y, blk + 82u);
    return vec2<f32>(d * f32(b & 0xfu), dmin * f32(b >> 4u));
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

// A half unit (`decode_half`, formats/decode_half.wgsl): weights 16h .. 16h + 15 of unit `unit`
// (h = 0, 1: one sub-block of 16), as 4 vec4s: the tiled matmul's share of a unit (two
// invocations decode one row's unit).
//
// The loaded words of a half: its 16 bytes of qs as the aligned words that hold them (`qs`
// and `qs_next`: a block may start at any word offset), the words of its scale byte and of d
// and dmin, and the block's offset (which bytes of those words).
struct RawHalf {
    qs: vec4<u32>,
    qs_next: u32,
    sc: u32,
    dw: vec2<u32>,
    blk: u32,
}

fn load_half_raw(blk: u32, unit: u32, h: u32) -> RawHalf {
    let i = (blk + 16u + 32u * (unit >> 2u) + 16u * h) >> 2u;
    return RawHalf(wd4(i), wd(i + 4u), wd((blk + 2u * unit + h) >> 2u), q2_k_d_words(blk), blk);
}

fn decode_raw(r: RawHalf, unit: u32, h: u32) -> array<vec4<f32>, 4> {
    let shift = 2u * (unit & 3u);
    let sm = q2_k_scale_min_of(r.sc, r.dw, r.blk, 2u * unit + h);
    // The qs words start at a multiple of 4 bytes from blk, so they take its shift.
    let qs = join4(r.qs, r.qs_next, word_shift(r.blk));
    let q = (qs >> vec4<u32>(shift)) & vec4<u32>(0x03030303u);
    // One expression a quad, not a loop over an array: an array indexed in a loop may live in
    // local memory (docs/PERF.md, D-named-registers).
    return array<vec4<f32>, 4>(
        sm.x * vec4<f32>(unpack4xU8(q.x)) - sm.y,
        sm.x * vec4<f32>(unpack4xU8(q.y)) - sm.y,
        sm.x * vec4<f32>(unpack4xU8(q.z)) - sm.y,
        sm.x * vec4<f32>(unpack4xU8(q.w)) - sm.y,
    );
}
