// The training attention forward on the tensor cores (with attention/train_coop_tiles.wgsl and
// attention/train_params.wgsl): attention/train_forward.wgsl's contract (o and each pair's
// log-sum-exp, or with p.key_splits > 1 each split's unnormalised o, max and sum for
// attention/train_combine.wgsl) for dk = dv = HD, with q, k, v and the weights rounded to f16.
//
// One workgroup per (tile of 16 pairs of one kv head, split of its keys); the last tiles
// first, as the f32 kernel. Subgroup s holds the pairs' q over its half s / 2 of the dims and
// computes, for each block of 32 keys staged in `tile`, the partial scores of the block's key
// tile s % 2. Two passes over the blocks, so that the output accumulators are never rescaled
// (a cooperative matrix's elements cannot be addressed by row): pass 1 takes each pair's max
// and sum of exp(s - max) (each of a pair's 8 invocations over its 4 keys of every block,
// online, the 8 partials combined at the end); pass 2 recomputes the scores, rounds P =
// exp(s - m) / l (split: exp(s - m)) to f16 and adds P V into f32 accumulators, subgroup s
// owning dims s HD / 4 .. (s + 1) HD / 4. Rescaling through workgroup memory instead would move
// the 16 x HD accumulators there and back at every block (16 KiB at HD 256, against the 8 KiB
// of keys pass 1 stages) with two more barriers a block.

@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> k: array<f32>;
@group(0) @binding(3) var<storage, read> v: array<f32>;
@group(0) @binding(4) var<storage, read> start: array<u32>;
@group(0) @binding(5) var<storage, read_write> o: array<f32>;
@group(0) @binding(6) var<storage, read_write> lse: array<f32>;

// Keys a block.
const BK: u32 = 32u;
// Row stride of `wt` in vec4<f16> (32 weights + 8 of padding).
const RW: u32 = 10u;

// The block's P, 16 pairs x 32 keys.
var<workgroup> wt: array<vec4<f16>, 160>;
// Each invocation's running max and sum at the end of pass 1.
var<workgroup> part_m: array<f32, 128>;
var<workgroup> part_l: array<f32, 128>;
// The tile's keys (x .. y); a vec4 so that every workgroup variable is a multiple of 16 bytes.
var<workgroup> range_s: vec4<u32>;

// The four scores of keys j0 + 4 c .. + 3 for pair `me` (tile row r) from the block's partial
// products: scaled, soft-capped, LOW where the pair does not see the key.
fn block_scores(j0: u32, r: u32, c: u32, me: Sight) -> vec4<f32> {
    let t = c / 4u;
    let col = 4u * (c % 4u);
    let raw = vec4<f32>(
        part_sum(t, r, col),
        part_sum(t, r, col + 1u),
        part_sum(t, r, col + 2u),
        part_sum(t, r, col + 3u),
    );
    let js = vec4<u32>(j0 + 4u * c) + vec4<u32>(0u, 1u, 2u, 3u);
    let vis = vec4<bool>(me.valid) & (js >= vec4<u32>(me.first)) & (js <= vec4<u32>(me.i));
    return select(vec4<f32>(LOW), score4(p.scale * raw).s, vis);
}

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) tid: u32,
) {
    let sg = tid / 32u;
    coop_lane(tid % 32u);
    let pairs = pair_count();
    let pairs_tile = pair_tile(group_index(wid, nwg), TR);
    if !pairs_tile.valid {
        return;
    }
    let g = pairs_tile.g;
    let e0 = pairs_tile.e0;
    let split = wid.z;
    stage_q(g, e0, 0u, TR, tid);
    if tid == 0u {
        let i0 = e0 / group_size();
        let hi = (min(e0 + TR, pairs) - 1u) / group_size() + 1u;
        range_s = vec4<u32>(first_key(i0, start[p.start_offset + i0]), hi, 0u, 0u);
    }
    // Uniform for the loops' barriers (start[] is a storage read); also the barrier after q.
    let range = workgroupUniformLoad(&range_s);
    let keys = split_share(range.x, range.y, BK, p.key_splits, split);
    // This subgroup's key tile of a block and half of the dims; its q.
    let t = sg % 2u;
    let dh = sg / 2u;
    let a0 = held(0u, dh, 0u);
    let a1 = held(0u, dh, 1u);
    let a2 = held(0u, dh, 2u);
    let a3 = held(0u, dh, 3u);
    let a4 = held(0u, dh, 4u);
    let a5 = held(0u, dh, 5u);
    let a6 = held(0u, dh, 6u);
    let a7 = held(0u, dh, 7u);
    // q is held: `tile` may take the keys.
    workgroupBarrier();

    // Plain-code role: pair e0 + r, keys 4 c .. 4 c + 3 of each block.
    let r = tid % TR;
    let c = tid / TR;
    let me = sight(e0 + r);

    // Pass 1: each pair's max and sum.
    var m = LOW;
    var l = 0.0;
    for (var j0 = keys.x; j0 < keys.y; j0 += BK) {
        stage_keys(g, j0, 0u, BK, false, tid);
        workgroupBarrier();
        score_part(a0, a1, a2, a3, a4, a5, a6, a7, 16u * t, dh, sg);
        workgroupBarrier();
        let s = block_scores(j0, r, c, me);
        let mb = max(m, max(max(s.x, s.y), max(s.z, s.w)));
        let w = select(vec4<f32>(0.0), exp(s - mb), s > vec4<f32>(LOW));
        l = l * exp(m - mb) + ((w.x + w.y) + (w.z + w.w));
        m = mb;
    }
    part_m[tid] = m;
    part_l[tid] = l;
    workgroupBarrier();
    var mr = LOW;
    for (var x = 0u; x < 8u; x++) {
        mr = max(mr, part_m[r + TR * x]);
    }
    var lr = 0.0;
    for (var x = 0u; x < 8u; x++) {
        lr += part_l[r + TR * x] * exp(part_m[r + TR * x] - mr);
    }
    let split_out = p.key_splits > 1u;
    var inv = 1.0;
    if !split_out && lr > 0.0 {
        inv = 1.0 / lr;
    }

    // Pass 2: o = sum over the blocks of P V.
    let d0 = sg * (HD / 4u);
    var o0 = MatC();
    var o1 = MatC();
    var o2 = MatC();
    var o3 = MatC();
    for (var j0 = keys.x; j0 < keys.y; j0 += BK) {
        stage_keys(g, j0, 0u, BK, false, tid);
        workgroupBarrier();
        score_part(a0, a1, a2, a3, a4, a5, a6, a7, 16u * t, dh, sg);
        workgroupBarrier();
        let s = block_scores(j0, r, c, me);
        let w = select(vec4<f32>(0.0), exp(s - mr) * inv, s > vec4<f32>(LOW));
        wt[r * RW + c] = vec4<f16>(w);
        // The scores' products are done with k: v takes its place.
        stage_keys(g, j0, 0u, BK, true, tid);
        workgroupBarrier();
        for (var kc = 0u; kc < 2u; kc++) {
            let a = load_w(4u * kc);
            let at = 16u * kc * RS + d0 / 4u;
            o0 = mma(a, load_b_rows(at), o0);
            if HD >= 128u {
                o1 = mma(a, load_b_rows(at + 4u), o1);
            }
            if HD >= 256u {
                o2 = mma(a, load_b_rows(at + 8u), o2);
                o3 = mma(a, load_b_rows(at + 12u), o3);
            }
        }
        workgroupBarrier();
    }

    let rows = p.n * p.n_head;
    let o_at = p.o_offset + split * rows * HD;
    put_o(o0, 0u, sg, tid, g, e0, o_at);
    if HD >= 128u {
        put_o(o1, 16u, sg, tid, g, e0, o_at);
    }
    if HD >= 256u {
        put_o(o2, 32u, sg, tid, g, e0, o_at);
        put_o(o3, 48u, sg, tid, g, e0, o_at);
    }
    if tid < TR && me.valid {
        let row = pair_row(g, e0 + r);
        if split_out {
            lse[p.lse_offset + split * rows + row] = mr;
            lse[p.lse_offset + (p.key_splits + split) * rows + row] = lr;
        } else {
            lse[p.lse_offset + row] = mr + log(lr);
        }
    }
}

// Accumulator `acc` (dims dt .. dt + 15 of each subgroup's quarter) into o from `o_at`, the
// pairs inside, through `parts`. Called by every invocation in uniform control flow (it holds
// barriers).
fn put_o(acc: MatC, dt: u32, sg: u32, tid: u32, g: u32, e0: u32, o_at: u32) {
    store_rows(acc, 256u * sg);
    workgroupBarrier();
    let pairs = pair_count();
    for (var u = 0u; u < 8u; u++) {
        let i = tid + WG * u;
        let e = e0 + (i % 256u) / 16u;
        if e < pairs {
            o[o_at + pair_row(g, e) * HD + (i / 256u) * (HD / 4u) + dt + i % 16u] = parts[i];
        }
    }
    workgroupBarrier();
}
