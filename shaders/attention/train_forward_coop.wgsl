// The training attention forward on the tensor cores (with attention/train_params.wgsl,
// attention/train_coop_rows.wgsl, the 64-row tile of attention/coop_forward_tile.wgsl and the
// loads and stores of attention/coop_io.wgsl, or in the tests' emulation
// attention/coop_io_emul.wgsl):
// attention/train_forward.wgsl's contract (o and each pair's log-sum-exp, or with
// p.key_splits > 1 each split's unnormalised o, max and sum for attention/train_combine.wgsl)
// for dk = dv = HD, with q, k, v and the weights rounded to f16 and the products on
// 16 x 16 x 16 cooperative matrices with f32 sums.
//
// One workgroup of 256 invocations = 8 subgroups of 32 per (tile of TR = 64 (row, head) pairs
// of one kv head, split of its keys); the last tiles first, as the f32 kernel. Subgroup s owns
// row tile s % 4 (16 pairs). Its pairs' q is staged once through `tile` (half of the dims at
// a time: 64 rows of HD values do not fit beside the rest) and held in registers as HD / 16 A
// operands. The keys the tile sees are walked in blocks of BK = 32 staged as f16 in `tile`:
// subgroup s computes the 16 x 16 score tile of its pairs and the block's key tile s / 4 over
// all of the dims, into `scores` (f32); the plain code (invocation t: pair t % 64, keys
// 8 (t / 64) .. + 7 of the block) applies the scale, soft-cap and masks. So that a staged key
// feeds 64 pairs, a block costs few barriers per product (the 16-pair tiling fed 16 and spent
// as many barriers on a quarter of the products).
//
// Two passes over the blocks, so that the output accumulators are never rescaled (a
// cooperative matrix's elements cannot be addressed by row): pass 1 takes each pair's max and
// sum of exp(s - max) (each of its 4 invocations online over its 8 keys of every block, the 4
// partials combined at the end); pass 2 recomputes the scores, rounds P = exp(s - m) / l
// (split: exp(s - m)) to f16 into `wt`, stages v in place of k and adds P V into f32
// accumulators, subgroup s owning its row tile's dims (s / 4) HD / 2 .. + HD / 2 (HD / 32
// accumulators). Rescaling through workgroup memory instead would move the 64 x HD
// accumulators there and back at every block (64 KiB at HD 256, more than fits).
//
// Each block's global reads overlap the products before it: an invocation loads its share of
// the next rows (the block's v during its scores, the next block's k during P V) into
// registers (`staged`) and stores them to `tile` after the barrier that frees it. Every coop
// op is reached in uniform control flow (loop bounds come from workgroupUniformLoad, HD is an
// override). Workgroup memory at HD 256: `tile` 16.5 KiB, `scores` 8 KiB, `wt` 5 KiB, under
// lavapipe's 32 KiB (the tests run the emulated body there).

@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> k: array<f32>;
@group(0) @binding(3) var<storage, read> v: array<f32>;
@group(0) @binding(4) var<storage, read> start: array<u32>;
@group(0) @binding(5) var<storage, read_write> o: array<f32>;
@group(0) @binding(6) var<storage, read_write> lse: array<f32>;

// The tile's keys (x .. y); a vec4 so that every workgroup variable is a multiple of 16 bytes.
var<workgroup> range_s: vec4<u32>;

// `tile` from dims h HD / 2 .. + HD / 2 of the q rows of kv head g's pairs e0 .. e0 + 63
// (zeros past the block's pairs), QS vec4s a row.
fn stage_q_half(g: u32, e0: u32, h: u32, tid: u32) {
    let pairs = pair_count();
    for (var i = tid; i < TR * QS; i += WG) {
        let r = i / QS;
        let x = i % QS;
        var a = vec4<f32>(0.0);
        if e0 + r < pairs {
            a = q4(p.q_offset + pair_row(g, e0 + r) * HD + h * (HD / 2u) + 4u * x);
        }
        tile[r * QS + x] = vec4<f16>(a);
    }
}

// This invocation's share of the 32 k rows (`from_v`: v rows) of kv head g from key j0 into
// `staged` (zeros past the block).
fn load_block(g: u32, j0: u32, from_v: bool, tid: u32) {
    staged[0] = load_share(g, j0, from_v, tid, 0u);
    staged[1] = load_share(g, j0, from_v, tid, 1u);
    if HD >= 128u {
        staged[2] = load_share(g, j0, from_v, tid, 2u);
        staged[3] = load_share(g, j0, from_v, tid, 3u);
    }
    if HD >= 256u {
        staged[4] = load_share(g, j0, from_v, tid, 4u);
        staged[5] = load_share(g, j0, from_v, tid, 5u);
        staged[6] = load_share(g, j0, from_v, tid, 6u);
        staged[7] = load_share(g, j0, from_v, tid, 7u);
    }
}

// Share u of load_block's: the load clamped into bounds and selected, no branch around it.
fn load_share(g: u32, j0: u32, from_v: bool, tid: u32, u: u32) -> vec4<f16> {
    let i = tid + WG * u;
    let r = i / (HD / 4u);
    let at = (min(j0 + r, p.n - 1u) * p.n_kv + g) * HD + 4u * (i % (HD / 4u));
    var a: vec4<f32>;
    if from_v {
        a = v4(p.v_offset + at);
    } else {
        a = k4(p.k_offset + at);
    }
    return vec4<f16>(select(vec4<f32>(0.0), a, j0 + r < p.n));
}

// The four scores of keys j0 + c0 .. c0 + 3 for pair `me` (tile row r): scaled, soft-capped,
// LOW where the pair does not see the key.
fn block_scores(j0: u32, r: u32, c0: u32, me: Sight) -> vec4<f32> {
    let raw = vec4<f32>(
        scores[TR * c0 + r],
        scores[TR * (c0 + 1u) + r],
        scores[TR * (c0 + 2u) + r],
        scores[TR * (c0 + 3u) + r],
    );
    let js = vec4<u32>(j0 + c0) + vec4<u32>(0u, 1u, 2u, 3u);
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
    // This subgroup's row tile, and its key tile of a block (scores) or half of the dims (P V).
    let rt = sg % 4u;
    let half = sg / 4u;
    stage_q_half(g, e0, 0u, tid);
    if tid == 0u {
        let i0 = e0 / group_size();
        let hi = (min(e0 + TR, pairs) - 1u) / group_size() + 1u;
        range_s = vec4<u32>(first_key(i0, start[p.start_offset + i0]), hi, 0u, 0u);
    }
    // Uniform for the loops' barriers (start[] is a storage read); also the barrier after q.
    let range = workgroupUniformLoad(&range_s);
    let keys = split_share(range.x, range.y, BK, p.key_splits, split);
    // The row tile's q, 16 dims an operand (those past HD / 32 a half are never read).
    let qa = 16u * rt * QS;
    let a0 = load_held(qa);
    let a1 = load_held(qa + 4u);
    let a2 = load_held(qa + 8u);
    let a3 = load_held(qa + 12u);
    let a4 = load_held(qa + 16u);
    let a5 = load_held(qa + 20u);
    let a6 = load_held(qa + 24u);
    let a7 = load_held(qa + 28u);
    workgroupBarrier();
    stage_q_half(g, e0, 1u, tid);
    workgroupBarrier();
    let b0 = load_held(qa);
    let b1 = load_held(qa + 4u);
    let b2 = load_held(qa + 8u);
    let b3 = load_held(qa + 12u);
    let b4 = load_held(qa + 16u);
    let b5 = load_held(qa + 20u);
    let b6 = load_held(qa + 24u);
    let b7 = load_held(qa + 28u);
    if keys.x < keys.y {
        load_block(g, keys.x, false, tid);
    }
    // q is held: `tile` may take the keys.
    workgroupBarrier();

    // Plain-code role: pair e0 + r, keys 8 c .. 8 c + 7 of each block.
    let r = tid % TR;
    let c = tid / TR;
    let me = sight(e0 + r);

    // Pass 1: each pair's max and sum.
    var m = LOW;
    var l = 0.0;
    for (var j0 = keys.x; j0 < keys.y; j0 += BK) {
        store_block(tid);
        workgroupBarrier();
        if j0 + BK < keys.y {
            load_block(g, j0 + BK, false, tid);
        }
        score_tile(a0, a1, a2, a3, a4, a5, a6, a7, b0, b1, b2, b3, b4, b5, b6, b7, rt, half);
        workgroupBarrier();
        let s0 = block_scores(j0, r, 8u * c, me);
        let s1 = block_scores(j0, r, 8u * c + 4u, me);
        let s01 = max(s0, s1);
        let mb = max(m, max(max(s01.x, s01.y), max(s01.z, s01.w)));
        let w0 = select(vec4<f32>(0.0), exp(s0 - mb), s0 > vec4<f32>(LOW));
        let w1 = select(vec4<f32>(0.0), exp(s1 - mb), s1 > vec4<f32>(LOW));
        l = l * exp(m - mb) + (((w0.x + w0.y) + (w0.z + w0.w)) + ((w1.x + w1.y) + (w1.z + w1.w)));
        m = mb;
    }
    // Pass 2 starts from the first block's k.
    if keys.x < keys.y {
        load_block(g, keys.x, false, tid);
    }
    // The last block's scores are read: `scores` takes the partials.
    workgroupBarrier();
    scores[tid] = m;
    scores[WG + tid] = l;
    workgroupBarrier();
    var mr = LOW;
    for (var x = 0u; x < 4u; x++) {
        mr = max(mr, scores[r + TR * x]);
    }
    var lr = 0.0;
    for (var x = 0u; x < 4u; x++) {
        lr += scores[WG + r + TR * x] * exp(scores[r + TR * x] - mr);
    }
    let split_out = p.key_splits > 1u;
    var inv = 1.0;
    if !split_out && lr > 0.0 {
        inv = 1.0 / lr;
    }

    // Pass 2: o = sum over the blocks of P V.
    var o0 = MatC();
    var o1 = MatC();
    var o2 = MatC();
    var o3 = MatC();
    var o4 = MatC();
    var o5 = MatC();
    var o6 = MatC();
    var o7 = MatC();
    let wa = 16u * rt * RW;
    let va = half * (HD / 8u);
    for (var j0 = keys.x; j0 < keys.y; j0 += BK) {
        store_block(tid);
        // Also orders the partials' reads before the scores' stores.
        workgroupBarrier();
        load_block(g, j0, true, tid);
        score_tile(a0, a1, a2, a3, a4, a5, a6, a7, b0, b1, b2, b3, b4, b5, b6, b7, rt, half);
        workgroupBarrier();
        let s0 = block_scores(j0, r, 8u * c, me);
        let s1 = block_scores(j0, r, 8u * c + 4u, me);
        let w0 = select(vec4<f32>(0.0), exp(s0 - mr) * inv, s0 > vec4<f32>(LOW));
        let w1 = select(vec4<f32>(0.0), exp(s1 - mr) * inv, s1 > vec4<f32>(LOW));
        wt[r * RW + 2u * c] = vec4<f16>(w0);
        wt[r * RW + 2u * c + 1u] = vec4<f16>(w1);
        // The scores' products are done with k: v takes its place.
        store_block(tid);
        workgroupBarrier();
        if j0 + BK < keys.y {
            load_block(g, j0 + BK, false, tid);
        }
        for (var kc = 0u; kc < 2u; kc++) {
            let a = load_w(wa + 4u * kc);
            let at = 16u * kc * RS + va;
            o0 = mma(a, load_b_rows(at), o0);
            o1 = mma(a, load_b_rows(at + 4u), o1);
            if HD >= 128u {
                o2 = mma(a, load_b_rows(at + 8u), o2);
                o3 = mma(a, load_b_rows(at + 12u), o3);
            }
            if HD >= 256u {
                o4 = mma(a, load_b_rows(at + 16u), o4);
                o5 = mma(a, load_b_rows(at + 20u), o5);
                o6 = mma(a, load_b_rows(at + 24u), o6);
                o7 = mma(a, load_b_rows(at + 28u), o7);
            }
        }
        workgroupBarrier();
    }

    let rows = p.n * p.n_head;
    let o_at = p.o_offset + split * rows * HD;
    // Without keys the loop left the partials' reads unordered before `put_o`'s stores.
    workgroupBarrier();
    put_o(o0, 0u, sg, tid, g, e0, o_at);
    put_o(o1, 16u, sg, tid, g, e0, o_at);
    if HD >= 128u {
        put_o(o2, 32u, sg, tid, g, e0, o_at);
        put_o(o3, 48u, sg, tid, g, e0, o_at);
    }
    if HD >= 256u {
        put_o(o4, 64u, sg, tid, g, e0, o_at);
        put_o(o5, 80u, sg, tid, g, e0, o_at);
        put_o(o6, 96u, sg, tid, g, e0, o_at);
        put_o(o7, 112u, sg, tid, g, e0, o_at);
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

// Accumulator `acc` (dims dt .. dt + 15 of each subgroup's half) into o from `o_at`, the
// pairs inside, through `scores` (tile sg at 256 sg, row-major). Called by every invocation in
// uniform control flow (it holds barriers).
fn put_o(acc: MatC, dt: u32, sg: u32, tid: u32, g: u32, e0: u32, o_at: u32) {
    store_rows(acc, 256u * sg);
    workgroupBarrier();
    let pairs = pair_count();
    for (var u = 0u; u < 8u; u++) {
        let i = tid + WG * u;
        let t = i / 256u;
        let e = e0 + 16u * (t % 4u) + (i % 256u) / 16u;
        if e < pairs {
            o[o_at + pair_row(g, e) * HD + (t / 4u) * (HD / 2u) + dt + i % 16u] = scores[i];
        }
    }
    workgroupBarrier();
}
