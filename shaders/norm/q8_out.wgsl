// residual_norm's q8 output: besides y (f32), y's q8 copy at word p.q_offset of `q`, the
// vector a decode matvec reads with `Input::Q8` (layout and rule: matvec/q8_block.wgsl, which
// quantize_q8 uses too, so these are the words quantize_q8 would write from this y). One row
// (decode): `ResidualNorm::op_q8` refuses more, and n is a multiple of 32.
//
// Invocation tid holds y's elements (4g + c) * WG + tid of the tile (group g, part c; WG =
// 256), so a block of 32 is 32 neighbouring invocations of one part, and a word of 4 inputs
// spans 4 invocations. The tile goes through workgroup memory one group at a time (1024
// values, 8 blocks a part): then lane tid takes 4 consecutive inputs, the one word of each
// digit they make, and lanes 8b .. 8b + 8 hold block b as q8_block.wgsl wants. Nothing
// assumes a subgroup size.

@group(0) @binding(6) var<storage, read_write> q: array<u32>;

// y of one group, part c of invocation tid at c * WG + tid.
var<workgroup> y_round: array<f32, 1024>;

// Group g of tile t of y (v: this invocation's parts of it) into the q8 copy. Called by every
// invocation, in uniform control flow.
fn store_q8_group(t: u32, g: u32, tid: u32, v: vec4<f32>) {
    // Row-relative index of the group's first input: a group that starts past n is empty.
    let start = group_start(t, g);
    if start >= p.n {
        return;
    }
    // The previous group's reads of y_round and amax_part are done.
    workgroupBarrier();
    y_round[tid] = v.x;
    y_round[WG + tid] = v.y;
    y_round[2u * WG + tid] = v.z;
    y_round[3u * WG + tid] = v.w;
    workgroupBarrier();
    // A lane past n holds zeros and stores nothing.
    let i = start + 4u * tid;
    let live = i < p.n;
    var x = vec4<f32>(0.0);
    if live {
        let at = 4u * tid;
        x = vec4<f32>(y_round[at], y_round[at + 1u], y_round[at + 2u], y_round[at + 3u]);
    }
    let amax = q8_block_amax(x, tid);
    if live {
        q8_store(p.q_offset, p.n, i / 4u, x, amax);
    }
}

// Tile t of y into the q8 copy, group by group.
fn store_q8(t: u32, tid: u32, v: Tile) {
    store_q8_group(t, 0u, tid, v.g0);
    if GROUPS > 1u { store_q8_group(t, 1u, tid, v.g1); }
    if GROUPS > 2u { store_q8_group(t, 2u, tid, v.g2); }
    if GROUPS > 3u { store_q8_group(t, 3u, tid, v.g3); }
}
