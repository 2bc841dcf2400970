// residual_norm's q8 output: besides y (f32), y's q8 copy at word p.q_offset of `q`, the
// vector a decode matvec reads with `Input::Q8` (layout and rule: matvec/q8_block.wgsl, which
// quantize_q8 uses too, so these are the words quantize_q8 would write from this y). One row
// (decode): `ResidualNorm::op_q8` refuses more, and n is a multiple of 32.
//
// Invocation tid holds y's elements k * WG + tid (slot k, WG = 256) of the tile, so a block of
// 32 is 32 neighbouring invocations of one slot, and a word of 4 inputs spans 4 invocations.
// The tile goes through workgroup memory 4 slots at a time (1024 values, 8 blocks a slot):
// then lane tid takes 4 consecutive inputs, the one word of each digit they make, and lanes
// 8b .. 8b + 8 hold block b as q8_block.wgsl wants. Nothing assumes a subgroup size.

@group(0) @binding(6) var<storage, read_write> q: array<u32>;

// Slots per round: WG lanes of 4 inputs each.
const ROUND: u32 = 4u;
// y of the round's slots, slot j's element of invocation tid at j * WG + tid.
var<workgroup> y_round: array<f32, 1024>;

// Tile t of y (in hv) into the q8 copy. Called by every invocation, in uniform control flow.
fn store_q8(t: u32, tid: u32) {
    for (var k0 = 0u; k0 < used(t); k0 += ROUND) {
        // The previous round's reads of y_round and amax_part are done.
        workgroupBarrier();
        for (var j = 0u; j < ROUND; j++) {
            if k0 + j < used(t) {
                y_round[j * WG + tid] = hv[k0 + j];
            }
        }
        workgroupBarrier();
        // Row-relative index of this lane's first input; a lane past n (slots past used(t)
        // included: they start at or past n) holds zeros and stores nothing.
        let i = elem(t, 0u, k0) + 4u * tid;
        let live = i < p.n;
        var v = vec4<f32>(0.0);
        if live {
            let at = 4u * tid;
            v = vec4<f32>(y_round[at], y_round[at + 1u], y_round[at + 2u], y_round[at + 3u]);
        }
        let amax = q8_block_amax(v, tid);
        if live {
            q8_store(p.q_offset, p.n, i / 4u, v, amax);
        }
    }
}
