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

// Weights 16h .. 16h + 15 of the 32 at `blk` (h = 0, 1), as 4 vec4s: the tiled matmul's
// share of a unit (two invocations decode one row's unit).
fn decode_half(blk: u32, unit: u32, h: u32) -> array<vec4<f32>, 4> {
    let b = blk + 32u * h;
    // One expression a quad, not a loop over an array: an array indexed in a loop may live in
    // local memory (docs/PERF.md, D-named-registers).
    return array<vec4<f32>, 4>(
        vec4<f32>(unpack2x16float(load_u32(b + 0u)), unpack2x16float(load_u32(b + 4u))),
        vec4<f32>(unpack2x16float(load_u32(b + 8u)), unpack2x16float(load_u32(b + 12u))),
        vec4<f32>(unpack2x16float(load_u32(b + 16u)), unpack2x16float(load_u32(b + 20u))),
        vec4<f32>(unpack2x16float(load_u32(b + 24u)), unpack2x16float(load_u32(b + 28u))),
    );
}
