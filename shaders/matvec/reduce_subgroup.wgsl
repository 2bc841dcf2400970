// Matvec entry point with subgroup operations (Features::SUBGROUP). Invocations are numbered
// in subgroup order (subgroup * size + lane), so a quad's WG / QUADS lanes are whole aligned
// blocks of B = min(size, the largest power of two dividing the quad's lanes) lanes of one
// subgroup: each block sums its partials by a butterfly of shuffles (subgroupAdd when a
// block is the subgroup), one lane stores the block's sum, and lane r of the quad adds its
// blocks' sums of row r in order (deterministic). One barrier. The workgroup is a multiple
// of the subgroup size or ends in a partial subgroup whose lanes count from 0.

// This invocation's subgroup, its lane in it, the workgroup's subgroup count and the
// subgroup size, for the norm input's sums (matvec/sum_subgroup.wgsl) and the scaled
// input's (matvec/scaled_sum_subgroup.wgsl).
var<private> sg_index: u32;
var<private> sg_lane: u32;
var<private> sg_count: u32;
var<private> sg_size: u32;
// The blocks of this invocation's quad (lanes / block), for quad_total.
var<private> quad_blocks: u32;

// Row r's total of this invocation's quad, after the entry's barrier: its blocks' sums in
// order. Any lane may ask for any row (the GLU epilogue's lane t takes gate row t and up
// row t + 2 without exchanging them).
fn quad_total(r: u32) -> f32 {
    var v = 0.0;
    for (var i = 0u; i < quad_blocks; i++) {
        v += red[r * 256u + quad * quad_blocks + i];
    }
    return v;
}

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) tid: u32,
    @builtin(subgroup_id) sg: u32,
    @builtin(subgroup_invocation_id) lane: u32,
    @builtin(subgroup_size) size: u32,
    @builtin(num_subgroups) n_sg: u32,
) {
    sg_index = sg;
    sg_size = size;
    sg_lane = lane;
    sg_count = n_sg;
    let first = first_row(wid, nwg);
    if first >= p.n_rows {
        return;
    }
    let lanes = WG / QUADS;
    let me = sg * size + lane;
    quad = me / lanes;
    let t = me % lanes;
    let row0 = first + R * quad;
    var acc = accumulate(row0, t, me);
    let block = min(size, lanes & (0u - lanes));
    if block == size {
        acc = subgroupAdd(acc);
    } else {
        for (var o = 1u; o < block; o <<= 1u) {
            acc += subgroupShuffleXor(acc, o);
        }
    }
    if lane % block == 0u {
        for (var r = 0u; r < R; r++) {
            red[r * 256u + me / block] = acc[r];
        }
    }
    quad_blocks = lanes / block;
    workgroupBarrier();
    var v = 0.0;
    if t < R {
        v = quad_total(t);
    }
    store_rows(row0, t, me, v);
}
