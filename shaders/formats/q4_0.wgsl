// Q4_0: GGUF's 18-byte block (f16 d, 16 bytes of nibbles) stored in two planes: plane 0 the
// nibbles (one vec4 per block), plane 1 the f16 d. Weight j < 16 is the low nibble of byte j,
// weight j + 16 the high nibble. w = d * (q - 8).
const BLOCK_BYTES: u32 = 18u;
const BLOCK_UNITS: u32 = 1u;

fn decode_unit(blk: u32, unit: u32) {
    let bi = blk / BLOCK_BYTES;
    let d = plane_f16(1u, bi);
    let q = w[1u + bi];
    for (var k = 0u; k < 4u; k++) {
        let lo = d * (nibbles4(q[k], 0u) - 8.0);
        let hi = d * (nibbles4(q[k], 4u) - 8.0);
        for (var j = 0u; j < 4u; j++) {
            unit_w[4u * k + j] = lo[j];
            unit_w[16u + 4u * k + j] = hi[j];
        }
    }
}

// A half unit (`decode_half`, formats/decode_half.wgsl): weights 16h .. 16h + 15 of the block
// (h = 0: low nibbles, 1: high), as 4 vec4s: the tiled matmul's share of a unit (two
// invocations decode one row's block).
//
// The loaded words of a half: the block's nibbles, the word of plane 1 holding d, and the
// block index (which half of that word).
struct RawHalf {
    q: vec4<u32>,
    dw: u32,
    bi: u32,
}

fn load_half_raw(blk: u32, unit: u32, h: u32) -> RawHalf {
    let bi = blk / BLOCK_BYTES;
    return RawHalf(w[1u + bi], plane_f16_word(1u, bi), bi);
}

fn decode_raw(r: RawHalf, unit: u32, h: u32) -> array<vec4<f32>, 4> {
    let d = f16_of(r.dw, 2u * r.bi);
    let q = r.q;
    // One expression a quad, not a loop over an array: an array indexed in a loop may live in
    // local memory (docs/PERF.md, D-named-registers).
    return array<vec4<f32>, 4>(
        d * (nibbles4(q.x, 4u * h) - 8.0),
        d * (nibbles4(q.y, 4u * h) - 8.0),
        d * (nibbles4(q.z, 4u * h) - 8.0),
        d * (nibbles4(q.w, 4u * h) - 8.0),
    );
}
