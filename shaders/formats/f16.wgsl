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
