// The attention's entry point and tile reduction through workgroup memory (any device):
// invocations numbered by local_invocation_index. Each lane writes its shares of the tile's
// 16 scores to its slot, and after a barrier lane kk of a row sums key kk's LANES shares in
// lane order, finishes the score and publishes it; after a second barrier every lane reads
// its row's 16 scores. A third barrier per tile (`tile_done`) keeps the next tile's writes
// behind this tile's reads.

var<workgroup> part: array<array<f32, 16>, WG>;
var<workgroup> scores: array<array<f32, 16>, ROW_SLOTS>;

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(local_invocation_index) tid: u32,
) {
    attend(wid, tid);
}

fn row_scores(d: Tile, me: u32, slot: u32, lane: u32, kb: u32, keys: vec2<u32>, valid: bool, hi: u32) -> Tile {
    part[me] = array<f32, 16>(
        d.a.x, d.a.y, d.a.z, d.a.w, d.b.x, d.b.y, d.b.z, d.b.w,
        d.c.x, d.c.y, d.c.z, d.c.w, d.d.x, d.d.y, d.d.z, d.d.w,
    );
    workgroupBarrier();
    for (var kk = lane; kk < BK; kk += LANES) {
        var s = 0.0;
        for (var j = 0u; j < LANES; j++) {
            s += part[slot * LANES + j][kk];
        }
        scores[slot][kk] = finish_score(s, kb + kk, keys, valid, hi);
    }
    workgroupBarrier();
    let r = &scores[slot];
    return Tile(
        vec4<f32>((*r)[0], (*r)[1], (*r)[2], (*r)[3]),
        vec4<f32>((*r)[4], (*r)[5], (*r)[6], (*r)[7]),
        vec4<f32>((*r)[8], (*r)[9], (*r)[10], (*r)[11]),
        vec4<f32>((*r)[12], (*r)[13], (*r)[14], (*r)[15]),
    );
}

fn tile_done() {
    workgroupBarrier();
}
