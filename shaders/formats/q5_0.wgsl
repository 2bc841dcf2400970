// Q5_0: GGUF's 22-byte block (f16 d, u32 qh of fifth bits, 16 bytes of nibbles) stored in three
// planes: plane 0 the nibbles (one vec4 per block), plane 1 qh, plane 2 the f16 d. Weight
// j < 16: low nibble of byte j with bit j of qh; weight j + 16: high nibble with bit j + 16
// (formats/q5_codes.wgsl).
// w = d * (q - 16).
const BLOCK_BYTES: u32 = 22u;
const BLOCK_UNITS: u32 = 1u;

fn decode_unit(blk: u32, unit: u32) {
    let bi = blk / BLOCK_BYTES;
    let d = plane_f16(2u, bi);
    let qh = plane_u32(1u, bi);
    let q = w[1u + bi];
    for (var k = 0u; k < 4u; k++) {
        let c = q5_codes(q[k], qh, k);
        let lo = d * (vec4<f32>(unpack4xU8(c.x)) - 16.0);
        let hi = d * (vec4<f32>(unpack4xU8(c.y)) - 16.0);
        for (var j = 0u; j < 4u; j++) {
            unit_w[4u * k + j] = lo[j];
            unit_w[16u + 4u * k + j] = hi[j];
        }
    }
}

// A half unit (`decode_half`, formats/decode_half.wgsl): weights 16h .. 16h + 15 of the block
// (h = 0: low codes, 1: high), as 4 vec4s: the tiled matmul's share of a unit (two invocations
// decode one row's block).
//
// The loaded words of a half: the block's nibbles, its qh, the word of plane 2 holding d, and
// the block index (which half of that word).
struct RawHalf {
    q: vec4<u32>,
    qh: u32,
    dw: u32,
    bi: u32,
}

fn load_half_raw(blk: u32, unit: u32, h: u32) -> RawHalf {
    let bi = blk / BLOCK_BYTES;
    return RawHalf(w[1u + bi], plane_u32(1u, bi), plane_f16_word(2u, bi), bi);
}

fn decode_raw(r: RawHalf, unit: u32, h: u32) -> array<vec4<f32>, 4> {
    let d = f16_of(r.dw, 2u * r.bi);
    let qh = r.qh;
    let q = r.q;
    // One expression a quad, not a loop over an array: an array indexed in a loop may live in
    // local memory (docs/PERF.md, D-named-registers).
    return array<vec4<f32>, 4>(
        q5_0_quad(q5_codes(q.x, qh, 0u), h, d),
        q5_0_quad(q5_codes(q.y, qh, 1u), h, d),
        q5_0_quad(q5_codes(q.z, qh, 2u), h, d),
        q5_0_quad(q5_codes(q.w, qh, 3u), h, d),
    );
}

fn q5_0_quad(c: vec2<u32>, h: u32, d: f32) -> vec4<f32> {
    return d * (vec4<f32>(unpack4xU8(select(c.x, c.y, h == 1u))) - 16.0);
}
