// One level of top-K selection for sampling. The input (a row of logits, or the candidate
// lists of the previous level) is cut into blocks of B entries; each workgroup sorts its block
// best first (bitonic; the sort file has the entry point: sampling/sort_barrier.wgsl sorts in
// workgroup memory, sampling/sort_subgroup.wgsl mostly in registers) and writes its best K
// as (key, id) pairs. The best K of a row are among the best K of every block, so levels
// repeat (each one 16x shorter) until one list of K is left; the last level's workgroup (one
// block) draws the token from its block's best K instead (sampling/level_draw.wgsl).
//
// Order: larger logit first, ties to the lower id; NaN counts as -inf and -0 as +0 (the CPU
// sampler's order, `sampler/candidates.rs`). Logits become order-preserving u32 keys, so
// every comparison is an integer one (no float-compare surprises with infinities).
// Padding entries have key 0 (below -inf's key) and id NONE.

// The level's `Params` (n, src_offset, dst_offset, from_x and, for the last level, the
// draw's) and `level_end(tid, block)`, called by the entry point with the block sorted in
// `keys` / `ids`, come from the level file: sampling/level.wgsl (`store_best`) or
// sampling/level_draw.wgsl (the last level: the draw, sampling/draw.wgsl).
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> cand: array<vec2<u32>>;

override WG: u32 = 256u;
const B: u32 = 1024u;
const K: u32 = 64u;
const NONE: u32 = 0xffffffffu;
var<workgroup> keys: array<u32, 1024>;
var<workgroup> ids: array<u32, 1024>;

// Larger float, larger key: positive floats get the sign bit set, negative ones are
// complemented (their magnitude bits order backwards).
fn order_key(v: f32) -> u32 {
    let b = bitcast<u32>(v);
    if (b & 0x7fffffffu) > 0x7f800000u {
        return 0x007fffffu; // NaN: the key of -inf
    }
    if b == 0x80000000u {
        return 0x80000000u; // -0: the key of +0
    }
    if (b & 0x80000000u) != 0u {
        return ~b;
    }
    return b | 0x80000000u;
}

// Whether entry a goes before entry b.
fn better(ka: u32, ia: u32, kb: u32, ib: u32) -> bool {
    return ka > kb || (ka == kb && ia < ib);
}

// `better` for four pairs of entries at once.
fn better4(ka: vec4<u32>, ia: vec4<u32>, kb: vec4<u32>, ib: vec4<u32>) -> vec4<bool> {
    return (ka > kb) | ((ka == kb) & (ia < ib));
}

// The workgroup's block.
fn block_index(wid: vec3<u32>, nwg: vec3<u32>) -> u32 {
    return wid.y * nwg.x + wid.x;
}

// The network leaves a block's best K in its first K entries, in order; the rest is not
// sorted. Up to merges of K it is the bitonic sort's: runs of K sorted best first and worst
// first in turn. From merges of 2 K on, each half's best K are its first K entries (best
// first in the lower half, worst first in the upper one), and the merge keeps only the
// better K of those: its first stage (stride size / 2, `halving`) leaves the better entry
// of each pair in the lower half, so the merged list's first K hold its best K as a bitonic
// sequence, which the strides K / 2 .. 1 sort in the merged list's direction; the strides
// between are skipped (`next_stride`), and the entries past a list's first K are left
// behind. At B = 1024 and K = 64: 49 stages instead of a full sort's 55, 3 of them across 4
// subgroups or more instead of 6.
fn halving(size: u32, stride: u32) -> bool {
    return size >= 2u * K && stride == size >> 1u;
}

fn next_stride(size: u32, stride: u32) -> u32 {
    return select(stride >> 1u, K / 2u, halving(size, stride));
}

// Whether entry i keeps the better of its pair at stage (size, stride) (i the pair's lower
// index of a best-first merge, or the upper of a worst-first one; the lower of a halving).
fn keeps_better(i: u32, size: u32, stride: u32) -> bool {
    let lower = (i & stride) == 0u;
    return select(lower == ((i & size) == 0u), lower, halving(size, stride));
}

// The first bitonic merge a block needs. Logits come unordered: merges of 2 entries first.
// A previous level's lists are runs of K sorted best first, what the merges up to K leave
// where every other run is reversed (`load_block` reverses them), so the network starts at
// the merges of 2 K: 28 stages at B = 1024 instead of 49.
fn first_merge() -> u32 {
    return select(2u * K, 2u, p.from_x != 0u);
}

// Block `block`'s entries into keys / ids (padding past n; a previous level's odd runs
// reversed, worst first, as the bitonic merges up to K leave them). The caller then waits at
// a barrier.
fn load_block(tid: u32, block: u32) {
    for (var e = tid; e < B; e += WG) {
        var key = 0u;
        var id = NONE;
        if p.from_x != 0u {
            let g = block * B + e;
            if g < p.n {
                key = order_key(x[p.src_offset + g]);
                id = g;
            }
        } else {
            // n is whole runs here: a reversed entry lies in its run, so past n together.
            var g = block * B + e;
            if (e & K) != 0u {
                g ^= K - 1u;
            }
            if g < p.n {
                let c = cand[p.src_offset + g];
                key = c.x;
                id = c.y;
            }
        }
        keys[e] = key;
        ids[e] = id;
    }
}

// The sorted block's best K out.
fn store_best(tid: u32, block: u32) {
    for (var e = tid; e < K; e += WG) {
        cand[p.dst_offset + block * K + e] = vec2<u32>(keys[e], ids[e]);
    }
}
