// F16 weights, taken 32 at a time (one "block" of 64 bytes; a row's last block may be partial,
// the caller masks weights past n_in).
const BLOCK_BYTES: u32 = 64u;
const BLOCK_UNITS: u32 = 1u;

fn decode_unit(blk: u32, unit: u32) {
    for (var i = 0u; i < 16u; i++) {
        let h = unpack2x16float(load_u32(blk + 4u * i));
        unit_w[2u * i] = h.x;
        unit_w[2u * i + 1u] = h.y;
    }
}

// Weights 16h .. 16h + 15 of the 32 at `blk` (h = 0, 1), as 4 vec4s: the tiled matmul's share of a
// unit (two invocations decode one row's unit). Loaded (`load_half_raw`) and decoded (`decode_raw`)
// apart, so the tensor-core matmuls can issue the loads early and decode late
// (matmul/coop_stage.wgsl).
fn decode_half(blk: u32, unit: u32, h: u32) -> array<vec4<f32>, 4> {
    return decode_raw(load_half_raw(blk, unit, h), unit, h);
}

// The loaded words of a half unit: its 8 words as the aligned words that hold them (`a`, `b`
// and `next`: rows of an odd n_in start at 2-byte offsets) and the shift that joins them.
struct RawHalf {
    a: vec4<u32>,
    b: vec4<u32>,
    next: u32,
    s: u32,
}

fn load_half_raw(blk: u32, unit: u32, h: u32) -> RawHalf {
    let b = blk + 32u * h;
    let i = b >> 2u;
    return RawHalf(wd4(i), wd4(i + 4u), wd(i + 8u), word_shift(b));
}

fn decode_raw(r: RawHalf, unit: u32, h: u32) -> array<vec4<f32>, 4> {
    let lo = join4(r.a, r.b.x, r.s);
    let hi = join4(r.b, r.next, r.s);
    // One expression a quad, not a loop over an array: an array indexed in a loop may live in
    // local memory (docs/PERF.md, D-named-registers).
    return array<vec4<f32>, 4>(
        vec4<f32>(unpack2x16float(lo.x), unpack2x16float(lo.y)),
        vec4<f32>(unpack2x16float(lo.z), unpack2x16float(lo.w)),
        vec4<f32>(unpack2x16float(hi.x), unpack2x16float(hi.y)),
        vec4<f32>(unpack2x16float(hi.z), unpack2x16float(hi.w)),
    );
}
