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
    var r: array<vec4<f32>, 4>;
    for (var c = 0u; c < 4u; c++) {
        let b = blk + 32u * h + 8u * c;
        r[c] = vec4<f32>(unpack2x16float(load_u32(b)), unpack2x16float(load_u32(b + 4u)));
    }
    return r;
}
