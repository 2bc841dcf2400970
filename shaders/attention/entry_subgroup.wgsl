// The attention's entry point and tile reduction through subgroup shuffles (Features::SUBGROUP,
// one subgroup size S with LANES <= S dividing WG: `attention::in_subgroups`): invocations
// numbered in subgroup order (me = subgroup * S + lane), so a row's LANES lanes are an
// aligned block of one subgroup, and a butterfly of subgroupShuffleXor over them gives every
// lane its row's 16 totals. No workgroup memory and no barrier in the key loop. The sums run
// in butterfly order (entry_plain.wgsl: lane order), so the two programs agree to rounding.

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(subgroup_id) sg: u32,
    @builtin(subgroup_invocation_id) sg_lane: u32,
    @builtin(subgroup_size) sg_size: u32,
) {
    attend(wid, sg * sg_size + sg_lane);
}

// The sum of v over the row's LANES lanes, in every one of them.
fn row_sum4(v: vec4<f32>) -> vec4<f32> {
    var t = v;
    for (var o = LANES / 2u; o > 0u; o >>= 1u) {
        t += subgroupShuffleXor(t, o);
    }
    return t;
}

fn finish4(t: vec4<f32>, key0: u32, keys: vec2<u32>, valid: bool, hi: u32) -> vec4<f32> {
    return vec4<f32>(
        finish_score(t.x, key0, keys, valid, hi),
        finish_score(t.y, key0 + 1u, keys, valid, hi),
        finish_score(t.z, key0 + 2u, keys, valid, hi),
        finish_score(t.w, key0 + 3u, keys, valid, hi),
    );
}

fn row_scores(d: Tile, me: u32, slot: u32, lane: u32, kb: u32, keys: vec2<u32>, valid: bool, hi: u32) -> Tile {
    return Tile(
        finish4(row_sum4(d.a), kb, keys, valid, hi),
        finish4(row_sum4(d.b), kb + 4u, keys, valid, hi),
        finish4(row_sum4(d.c), kb + 8u, keys, valid, hi),
        finish4(row_sum4(d.d), kb + 12u, keys, valid, hi),
    );
}

fn tile_done() {}
