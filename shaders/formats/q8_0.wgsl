// Q8_0: GGUF's 34-byte block (f16 d, 32 x int8 q) stored in two planes: plane 0 the 32 bytes of
// q of every block (two vec4s per block), plane 1 the f16 d (two per word). w = d * q.
// BLOCK_BYTES stays GGUF's, so callers' byte offsets give the block index.
const BLOCK_BYTES: u32 = 34u;
const BLOCK_UNITS: u32 = 1u;

fn decode_unit(blk: u32, unit: u32) {
    let bi = blk / BLOCK_BYTES;
    let d = plane_f16(1u, bi);
    for (var h = 0u; h < 2u; h++) {
        let q = w[1u + 2u * bi + h];
        for (var k = 0u; k < 4u; k++) {
            let v = d * vec4<f32>(unpack4xI8(q[k]));
            for (var j = 0u; j < 4u; j++) {
                unit_w[16u * h + 4u * k + j] = v[j];
            }
        }
    }
}

// A half unit (`decode_half`, formats/decode_half.wgsl): weights 16h .. 16h + 15 of the block
// (h = 0, 1), as 4 vec4s: the tiled matmul's share of a unit (two invocations decode one row's
// block). One vec4 load of plane 0.
//
// The loaded words of a half: its 16 q, the word of plane 1 holding d, and the block index
// (which half of that word).
struct RawHalf {
    q: vec4<u32>,
    dw: u32,
    bi: u32,
}

fn load_half_raw(blk: u32, unit: u32, h: u32) -> RawHalf {
    let bi = blk / BLOCK_BYTES;
    return RawHalf(w[1u + 2u * bi + h], plane_f16_word(1u, bi), bi);
}

fn decode_raw(r: RawHalf, unit: u32, h: u32) -> array<vec4<f32>, 4> {
    let d = f16_of(r.dw, 2u * r.bi);
    let q = r.q;
    // One expression a quad, not a loop over an array: an array indexed in a loop may live in
    // local memory (docs/PERF.md, D-named-registers).
    return array<vec4<f32>, 4>(
        d * vec4<f32>(unpack4xI8(q.x)),
        d * vec4<f32>(unpack4xI8(q.y)),
        d * vec4<f32>(unpack4xI8(q.z)),
        d * vec4<f32>(unpack4xI8(q.w)),
    );
}
