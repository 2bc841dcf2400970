// F32 weights, taken 32 at a time (one "block" of 128 bytes; a row's last block may be partial,
// the caller masks weights past n_in).
const BLOCK_BYTES: u32 = 128u;
const BLOCK_UNITS: u32 = 1u;

fn decode_unit(blk: u32, unit: u32) {
    for (var i = 0u; i < 32u; i++) {
        unit_w[i] = bitcast<f32>(load_u32(blk + 4u * i));
    }
}

// A half unit (`decode_half`, formats/decode_half.wgsl): weights 16h .. 16h + 15 of the 32 at
// `blk` (h = 0, 1), as 4 vec4s: the tiled matmul's share of a unit (two invocations decode one
// row's unit).
//
// The loaded words of a half unit: its 16 words as the aligned words that hold them (`a`..`d`
// and `next`: the block may start at any byte offset) and the shift that joins them. 18
// registers, the most of any format, still held rather than decoded at load: F32 weights are
// rare in the tensor-core matmuls and the join is the whole decode.
struct RawHalf {
    a: vec4<u32>,
    b: vec4<u32>,
    c: vec4<u32>,
    d: vec4<u32>,
    next: u32,
    s: u32,
}

fn load_half_raw(blk: u32, unit: u32, h: u32) -> RawHalf {
    let b = blk + 64u * h;
    let i = b >> 2u;
    return RawHalf(wd4(i), wd4(i + 4u), wd4(i + 8u), wd4(i + 12u), wd(i + 16u), word_shift(b));
}

fn decode_raw(r: RawHalf, unit: u32, h: u32) -> array<vec4<f32>, 4> {
    // One expression a quad, not a loop over an array: an array indexed in a loop may live in
    // local memory (docs/PERF.md, D-named-registers).
    return array<vec4<f32>, 4>(
        bitcast<vec4<f32>>(join4(r.a, r.b.x, r.s)),
        bitcast<vec4<f32>>(join4(r.b, r.c.x, r.s)),
        bitcast<vec4<f32>>(join4(r.c, r.d.x, r.s)),
        bitcast<vec4<f32>>(join4(r.d, r.next, r.s)),
    );
}
