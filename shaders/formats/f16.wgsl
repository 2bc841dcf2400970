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

// A half unit (`decode_half`, formats/decode_half.wgsl): weights 16h .. 16h + 15 of the 32 at
// `blk` (h = 0, 1), as 4 vec4s: the tiled matmul's share of a unit (two invocations decode one
// row's unit). Its loads: formats/half_words.wgsl.
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
