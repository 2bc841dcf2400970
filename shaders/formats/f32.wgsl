// F32 weights, taken 32 at a time (one "block" of 128 bytes; a row's last block may be partial,
// the caller masks weights past n_in).
const BLOCK_BYTES: u32 = 128u;
const BLOCK_UNITS: u32 = 1u;

fn decode_unit(blk: u32, unit: u32) {
    for (var i = 0u; i < 32u; i++) {
        unit_w[i] = bitcast<f32>(load_u32(blk + 4u * i));
    }
}
