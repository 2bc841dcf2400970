// BF16 weights, taken 32 at a time (one "block" of 64 bytes; a row's last block may be partial,
// the caller masks weights past n_in). A bf16 is the top 16 bits of an f32, so widening is a
// shift (exact, no float feature needed).
const BLOCK_BYTES: u32 = 64u;
const BLOCK_UNITS: u32 = 1u;

// The two bf16 of a little-endian word (the low half first), widened to f32.
fn bf16_pair(word: u32) -> vec2<f32> {
    return vec2<f32>(bitcast<f32>(word << 16u), bitcast<f32>(word & 0xffff0000u));
}

fn decode_unit(blk: u32, unit: u32) {
    for (var i = 0u; i < 16u; i++) {
        let h = bf16_pair(load_u32(blk + 4u * i));
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
        vec4<f32>(bf16_pair(lo.x), bf16_pair(lo.y)),
        vec4<f32>(bf16_pair(lo.z), bf16_pair(lo.w)),
        vec4<f32>(bf16_pair(hi.x), bf16_pair(hi.y)),
        vec4<f32>(bf16_pair(hi.z), bf16_pair(hi.w)),
    );
}
