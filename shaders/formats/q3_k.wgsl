// Q3_K: 110 bytes per 256 weights = hmask[32] (third bits, inverted), qs[64] (low 2 bits, laid
// out as Q2_K's), 12 bytes of sixteen packed 6-bit scales (offset 32), f16 d. Weight i has low
// bits as in Q2_K and third bit h = bit i / 32 of hmask[i % 32]; its level is
// (low | h << 2) - 4 (h set: low; clear: low - 4). w = (d * (sc - 32)) * level.
const BLOCK_BYTES: u32 = 110u;
const BLOCK_UNITS: u32 = 8u;

// d * (sc - 32) of sub-block `j` (0..15, 16 weights): sc's low 4 bits are nibble j / 8 of byte
// j % 8, its top 2 bits are bits 2 (j / 4) of byte 8 + j % 4.
fn q3_k_scale(blk: u32, j: u32) -> f32 {
    return q3_k_scale_of(q3_k_scale_words(blk, j), blk, j);
}

// The words holding sub-block j's low scale bits, its high scale bits and d.
fn q3_k_scale_words(blk: u32, j: u32) -> vec3<u32> {
    let s = blk + 96u;
    let low = wd((s + (j & 7u)) >> 2u);
    let high = wd((s + 8u + (j & 3u)) >> 2u);
    return vec3<u32>(low, high, wd((blk + 108u) >> 2u));
}

// `q3_k_scale` from the words `q3_k_scale_words` loads.
fn q3_k_scale_of(words: vec3<u32>, blk: u32, j: u32) -> f32 {
    let s = blk + 96u;
    let low = (byte_of(words.x, s + (j & 7u)) >> (4u * (j >> 3u))) & 0xfu;
    let high = (byte_of(words.y, s + 8u + (j & 3u)) >> (2u * (j >> 2u))) & 3u;
    return f16_of(words.z, blk + 108u) * f32(i32(low | (high << 4u)) - 32);
}

fn decode_unit(blk: u32, unit: u32) {
    let qs = blk + 32u + 32u * (unit >> 2u);
    let shift = 2u * (unit & 3u);
    let d0 = q3_k_scale(blk, 2u * unit);
    let d1 = q3_k_scale(blk, 2u * unit + 1u);
    for (var i = 0u; i < 8u; i++) {
        let q = load_u32(qs + 4u * i) >> shift;
        let h = load_u32(blk + 4u * i) >> unit;
        let dl = select(d1, d0, i < 4u);
        for (var k = 0u; k < 4u; k++) {
            let c = (ubyte(q, k) & 3u) | ((ubyte(h, k) & 1u) << 2u);
            unit_w[4u * i + k] = dl * f32(i32(c) - 4);
        }
    }
}

// A half unit (`decode_half`, formats/decode_half.wgsl): weights 16h .. 16h + 15 of unit `unit`
// (h = 0, 1: one sub-block of 16), as 4 vec4s: the tiled matmul's share of a unit (two
// invocations decode one row's unit).
//
// The loaded words of a half: its 16 bytes of qs and of hmask as the aligned words that hold
// them (blocks of 110 bytes start at 2-byte offsets), the words of its scale, and the block's
// offset (which bytes of those words).
struct RawHalf {
    qs: vec4<u32>,
    qs_next: u32,
    hm: vec4<u32>,
    hm_next: u32,
    sc: vec3<u32>,
    blk: u32,
}

fn load_half_raw(blk: u32, unit: u32, h: u32) -> RawHalf {
    let qs = (blk + 32u + 32u * (unit >> 2u) + 16u * h) >> 2u;
    let hm = (blk + 16u * h) >> 2u;
    return RawHalf(
        wd4(qs),
        wd(qs + 4u),
        wd4(hm),
        wd(hm + 4u),
        q3_k_scale_words(blk, 2u * unit + h),
        blk,
    );
}

fn decode_raw(r: RawHalf, unit: u32, h: u32) -> array<vec4<f32>, 4> {
    let shift = 2u * (unit & 3u);
    let dl = q3_k_scale_of(r.sc, r.blk, 2u * unit + h);
    // qs and hmask start at multiples of 4 bytes from blk, so they take its shift.
    let s = word_shift(r.blk);
    let q = (join4(r.qs, r.qs_next, s) >> vec4<u32>(shift)) & vec4<u32>(0x03030303u);
    let hb = (join4(r.hm, r.hm_next, s) >> vec4<u32>(unit)) & vec4<u32>(0x01010101u);
    let c = q | (hb << vec4<u32>(2u));
    // One expression a quad, not a loop over an array: an array indexed in a loop may live in
    // local memory (docs/PERF.md, D-named-registers).
    return array<vec4<f32>, 4>(
        dl * (vec4<f32>(unpack4xU8(c.x)) - 4.0),
        dl * (vec4<f32>(unpack4xU8(c.y)) - 4.0),
        dl * (vec4<f32>(unpack4xU8(c.z)) - 4.0),
        dl * (vec4<f32>(unpack4xU8(c.w)) - 4.0),
    );
}
