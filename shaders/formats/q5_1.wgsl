// Q5_1: 24 bytes = f16 d, f16 m, u32 qh (fifth bits), 16 bytes of nibbles; codes as in
// formats/q5_codes.wgsl. w = q * d + m (the quant crate's order, so weights match exactly).
const BLOCK_BYTES: u32 = 24u;
const BLOCK_UNITS: u32 = 1u;

fn decode_unit(blk: u32, unit: u32) {
    let d = load_f16(blk);
    let m = load_f16(blk + 2u);
    let qh = load_u32(blk + 4u);
    for (var i = 0u; i < 4u; i++) {
        let c = q5_codes(load_u32(blk + 8u + 4u * i), qh, i);
        for (var k = 0u; k < 4u; k++) {
            unit_w[4u * i + k] = f32(ubyte(c.x, k)) * d + m;
            unit_w[16u + 4u * i + k] = f32(ubyte(c.y, k)) * d + m;
        }
    }
}

// A half unit (`decode_half`, formats/decode_half.wgsl): weights 16h .. 16h + 15 of the block
// (h = 0: low codes, 1: high), as 4 vec4s: the tiled matmul's share of a unit (two invocations
// decode one row's block).
//
// The loaded words of a half: the 7 aligned words that hold the block's 24 bytes (`a`, then
// `b`: a block may start at any word offset; both halves need all of it) and its offset.
struct RawHalf {
    a: vec4<u32>,
    b: vec3<u32>,
    blk: u32,
}

fn load_half_raw(blk: u32, unit: u32, h: u32) -> RawHalf {
    let i = blk >> 2u;
    return RawHalf(wd4(i), vec3<u32>(wd(i + 4u), wd(i + 5u), wd(i + 6u)), blk);
}

fn decode_raw(r: RawHalf, unit: u32, h: u32) -> array<vec4<f32>, 4> {
    let d = f16_of(r.a.x, r.blk);
    // m (at blk + 2) is in the block's first word or, from a 2-byte offset, the next.
    let m = f16_of(select(r.a.x, r.a.y, ((r.blk + 2u) >> 2u) > (r.blk >> 2u)), r.blk + 2u);
    // qh (blk + 4) and the nibbles (blk + 8 ..) start a multiple of 4 bytes from blk.
    let s = word_shift(r.blk);
    let qh = join_u32(r.a.y, r.a.z, s);
    let q = join4(vec4<u32>(r.a.z, r.a.w, r.b.x, r.b.y), r.b.z, s);
    // One expression a quad, not a loop over an array: an array indexed in a loop may live in
    // local memory (docs/PERF.md, D-named-registers).
    return array<vec4<f32>, 4>(
        q5_1_quad(q5_codes(q.x, qh, 0u), h, d, m),
        q5_1_quad(q5_codes(q.y, qh, 1u), h, d, m),
        q5_1_quad(q5_codes(q.z, qh, 2u), h, d, m),
        q5_1_quad(q5_codes(q.w, qh, 3u), h, d, m),
    );
}

fn q5_1_quad(c: vec2<u32>, h: u32, d: f32, m: f32) -> vec4<f32> {
    return vec4<f32>(unpack4xU8(select(c.x, c.y, h == 1u))) * d + m;
}
