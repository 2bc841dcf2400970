// F32 weights, taken 32 at a time (one "block" of 128 bytes; a row's last block may be partial,
// the caller masks weights past n_in).
const BLOCK_BYTES: u32 = 128u;
const BLOCK_UNITS: u32 = 1u;

fn decode_unit(blk: u32, unit: u32) {
    for (var i = 0u; i < 32u; i++) {
        unit_w[i] = bitcast<f32>(load_u32(blk + 4u * i));
    }
}

// Weights 16h .. 16h + 15 of the 32 at `blk` (h = 0, 1), as 4 vec4s: the tiled matmul's
// share of a unit (two invocations decode one row's unit).
fn decode_half(blk: u32, unit: u32, h: u32) -> array<vec4<f32>, 4> {
    let b = blk + 64u * h;
    // One expression a quad, not a loop over an array: an array indexed in a loop may live in
    // local memory (docs/PERF.md, D-named-registers).
    return array<vec4<f32>, 4>(
        f32_quad(b + 0u),
        f32_quad(b + 16u),
        f32_quad(b + 32u),
        f32_quad(b + 48u),
    );
}

fn f32_quad(b: u32) -> vec4<f32> {
    return bitcast<vec4<f32>>(vec4<u32>(load_u32(b), load_u32(b + 4u), load_u32(b + 8u), load_u32(b + 12u)));
}
