// The training attention's backward, dq, on the tensor cores (with attention/train_params.wgsl,
// attention/train_coop_rows.wgsl, attention/train_backward_coop_inputs.wgsl and the loads and
// stores of attention/coop_io.wgsl, or in the tests' emulation
// attention/coop_io_emul.wgsl): attention/train_backward_dq.wgsl's contract (dq, or
// with p.key_splits > 1 each split's partial sums in its slice) for dk = dv = HD, with q, k,
// v, do and ds rounded to f16.
//
// One workgroup of 256 invocations = 8 subgroups of 32 per (tile of TP = 64 (row, head) pairs
// of one kv head, split of its keys), as the forward (attention/train_forward_coop.wgsl). The
// pairs' q and do (times DO_SCALE) are staged once through `tile`, a quarter of the dims at a
// time (rows 0..63 q, 64..127 do), and held as A operands over all of the dims: subgroup s
// holds rows 16 s .. 16 s + 15 of that stack, q of row tile s (s < 4) or do of row tile s - 4.
// Each pair's D = do . o is summed in f32 from the f32 rows (4 invocations a pair). The walk
// takes the keys its pairs see in blocks of BK = 16 (from the first key seen, so a block need
// not start at a multiple of 16), k staged in `tile` rows 0..15 and v in 16..31 as f16;
// subgroup s computes S = Q K^T (s < 4) or dP = dO V^T (s >= 4) for its row tile over all of
// the dims into `scores`. The plain code (invocation t: pair t % 64, keys 4 (t / 64) .. + 3)
// takes ds = exp(S - lse) (dP - D) cap' with the f32 kernel's masks, window, soft-cap and
// scale and stores it as f16 in `wt`; then dQ += ds K, subgroup s owning its row tile s % 4's
// dims (s / 4) HD / 2 .. + HD / 2 (HD / 32 accumulators). Four barriers a block of 16 keys x
// 64 pairs (k and v staged; S and dP stored; ds written; dQ done): 32 keys a block would need
// 33 KiB of `tile` alone at HD 256.
//
// As the forward, each block's global reads overlap the products before it: an invocation
// loads its share of the next block's k and v into registers (`staged`) before the score
// products and stores them to `tile` after the barrier that frees it. Workgroup memory at HD
// 256: `tile` 16.5 KiB, `scores` 8 KiB, `wt` 3 KiB, under lavapipe's 32 KiB.
//
// Scale of do: as attention/train_backward_dkdv_coop.wgsl's (its header says why): do is
// staged times DO_SCALE = 2^8, D likewise, so dP, ds and the accumulators carry the factor,
// taken off (exactly) when dq is written.

@group(0) @binding(8) var<storage, read_write> dq: array<f32>;

// Must be 256 (8 subgroups of 32: `Caps::coop_f16` holds only where the subgroup is 32 wide).
override WG: u32 = 256u;
// Head dimension (dk = dv): 64, 128 or 256.
override HD: u32 = 128u;
// Pairs a workgroup (four row tiles).
const TP: u32 = 64u;
// Keys a block (one key tile).
const BK: u32 = 16u;
// Row stride of `tile` holding a block's k and v, in vec4<f16> (HD values + 8 of padding):
// rows 16-byte aligned, consecutive rows in different banks.
override RS: u32 = HD / 4u + 2u;
// Row stride of `tile` holding a quarter of the dims of the pairs' q and do (no padding: 128
// padded rows would not fit, and they are loaded once).
override QS: u32 = HD / 16u;
// Column stride of `scores` (a column: the block's pairs).
const SC: u32 = TP;
// Row stride of `wt` in vec4<f16> (16 weights + 8 of padding: rows 16-byte aligned).
const RW: u32 = 6u;

// A block's k (rows 0..15) and v (16..31), HD values a row; or a quarter of the dims of the
// pairs' q (rows 0..63) and do (64..127).
var<workgroup> tile: array<vec4<f16>, 2112>; // 32 * RS at HD 256
// The block's S (elements 0..1023) and dP (1024..2047), 64 pairs x 16 keys each,
// column-major (pair r, key c at 64 c + r): the plain code's reads are consecutive. Also D's
// partials before the walk, and the accumulators on their way out (eight 16 x 16 tiles).
var<workgroup> scores: array<f32, 2048>;
// The block's ds (times DO_SCALE), 64 pairs x 16 keys as f16.
var<workgroup> wt: array<vec4<f16>, 384>;
// The keys the tile's pairs see (x .. y); a vec4 so that every workgroup variable is a
// multiple of 16 bytes.
var<workgroup> range_s: vec4<u32>;
// This invocation's share of the next block to stage (HD / 32 vec4s of 32 rows of HD).

// `tile` from dims x HD / 4 .. + HD / 4 of the q rows (rows 0..63) and the do rows times
// DO_SCALE (64..127) of kv head g's pairs e0 .. e0 + 63 (zeros past the block's pairs), QS
// vec4s a row.
fn stage_pairs_quarter(g: u32, e0: u32, x: u32, tid: u32) {
    let pairs = pair_count();
    for (var i = tid; i < 2u * TP * QS; i += WG) {
        let r = i / QS;
        let e = e0 + r % TP;
        var a = vec4<f32>(0.0);
        if e < pairs {
            let at = pair_row(g, e) * HD + x * (HD / 4u) + 4u * (i % QS);
            if r < TP {
                a = q4(p.q_offset + at);
            } else {
                a = do4(p.do_offset + at) * DO_SCALE;
            }
        }
        tile[i] = vec4<f16>(a);
    }
}

// This invocation's share of the block of keys from j0 into `staged` (attention/coop_stage.wgsl):
// k rows 0..15, v rows 16..31 (zeros past the block).
fn load_block(g: u32, j0: u32, tid: u32) {
    staged[0] = load_share(g, j0, tid, 0u);
    staged[1] = load_share(g, j0, tid, 1u);
    if HD >= 128u {
        staged[2] = load_share(g, j0, tid, 2u);
        staged[3] = load_share(g, j0, tid, 3u);
    }
    if HD >= 256u {
        staged[4] = load_share(g, j0, tid, 4u);
        staged[5] = load_share(g, j0, tid, 5u);
        staged[6] = load_share(g, j0, tid, 6u);
        staged[7] = load_share(g, j0, tid, 7u);
    }
}

// Share u of load_block's: the load clamped into bounds and selected, no branch around it.
fn load_share(g: u32, j0: u32, tid: u32, u: u32) -> vec4<f16> {
    let i = tid + WG * u;
    let r = i / (HD / 4u);
    let j = j0 + r % BK;
    let at = (min(j, p.n - 1u) * p.n_kv + g) * HD + 4u * (i % (HD / 4u));
    var a: vec4<f32>;
    if r < BK {
        a = k4(p.k_offset + at);
    } else {
        a = v4(p.v_offset + at);
    }
    return vec4<f16>(select(vec4<f32>(0.0), a, j < p.n));
}

// Subgroup sg's 16 x 16 tile of S (sg < 4) or dP (sg >= 4), before the scale: its held rows
// (`aXc`: dims X HD / 4 + 16 c .., HD / 64 of each quarter used) times the block's k rows
// (or v rows) of `tile` as B, into `scores`.
fn score_tile(
    a00: MatA, a01: MatA, a02: MatA, a03: MatA, a10: MatA, a11: MatA, a12: MatA, a13: MatA,
    a20: MatA, a21: MatA, a22: MatA, a23: MatA, a30: MatA, a31: MatA, a32: MatA, a33: MatA,
    sg: u32,
) {
    let at = 16u * (sg / 4u) * RS;
    let x = HD / 16u;
    var s = MatC();
    s = mma(a00, load_bt(at), s);
    s = mma(a10, load_bt(at + x), s);
    s = mma(a20, load_bt(at + 2u * x), s);
    s = mma(a30, load_bt(at + 3u * x), s);
    if HD >= 128u {
        s = mma(a01, load_bt(at + 4u), s);
        s = mma(a11, load_bt(at + x + 4u), s);
        s = mma(a21, load_bt(at + 2u * x + 4u), s);
        s = mma(a31, load_bt(at + 3u * x + 4u), s);
    }
    if HD >= 256u {
        s = mma(a02, load_bt(at + 8u), s);
        s = mma(a12, load_bt(at + x + 8u), s);
        s = mma(a22, load_bt(at + 2u * x + 8u), s);
        s = mma(a32, load_bt(at + 3u * x + 8u), s);
        s = mma(a03, load_bt(at + 12u), s);
        s = mma(a13, load_bt(at + x + 12u), s);
        s = mma(a23, load_bt(at + 2u * x + 12u), s);
        s = mma(a33, load_bt(at + 3u * x + 12u), s);
    }
    store_scores(s, 1024u * (sg / 4u) + 16u * (sg % 4u));
}

// ds times DO_SCALE for keys j0 + c0 .. c0 + 3 of pair `me` (tile row r) from the block's S
// and dP: zero where the pair does not see the key.
fn ds4(me: Sight, r: u32, j0: u32, c0: u32, li: f32, delta: f32) -> vec4<f32> {
    let at = TP * c0 + r;
    let s = vec4<f32>(scores[at], scores[at + TP], scores[at + 2u * TP], scores[at + 3u * TP]);
    let b = at + 1024u;
    let dp = vec4<f32>(scores[b], scores[b + TP], scores[b + 2u * TP], scores[b + 3u * TP]);
    let js = vec4<u32>(j0 + c0) + vec4<u32>(0u, 1u, 2u, 3u);
    let vis = vec4<bool>(me.valid) & (js >= vec4<u32>(me.first)) & (js <= vec4<u32>(me.i));
    let sc = score4(p.scale * s);
    return select(vec4<f32>(0.0), exp(sc.s - li) * (dp - delta) * sc.grad, vis);
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
    let pairs_tile = pair_tile(group_index(wid, nwg), TP);
    if !pairs_tile.valid {
        return;
    }
    let g = pairs_tile.g;
    let e0 = pairs_tile.e0;
    let split = wid.z;

    // Plain-code role: pair e0 + r, keys 4 c .. 4 c + 3 of each block; its share c of D.
    let r = tid % TP;
    let c = tid / TP;
    let me = sight(e0 + r);
    var row = 0u;
    var li = 0.0;
    var part = 0.0;
    if me.valid {
        row = pair_row(g, e0 + r);
        li = lse[p.lse_offset + row];
        for (var x = c * (HD / 16u); x < (c + 1u) * (HD / 16u); x++) {
            let at = row * HD + 4u * x;
            part += dot(do4(p.do_offset + at), o4(p.o_offset + at));
        }
    }
    scores[tid] = part;

    stage_pairs_quarter(g, e0, 0u, tid);
    if tid == 0u {
        let i0 = e0 / group_size();
        let hi = (min(e0 + TP, pairs) - 1u) / group_size() + 1u;
        range_s = vec4<u32>(first_key(i0, start[p.start_offset + i0]), hi, 0u, 0u);
    }
    // Uniform for the loop's barriers (start[] is a storage read); also the barrier after
    // the first quarter's staging and D's partials.
    let range = workgroupUniformLoad(&range_s);
    let keys = split_share(range.x, range.y, BK, p.key_splits, split);
    let d01 = scores[r] + scores[r + TP];
    let delta = (d01 + (scores[r + 2u * TP] + scores[r + 3u * TP])) * DO_SCALE;
    // The subgroup's rows of the stack, 16 dims an operand (those past HD / 64 a quarter are
    // never read).
    let qa = 16u * sg * QS;
    let a00 = load_held(qa);
    let a01 = load_held(qa + 4u);
    let a02 = load_held(qa + 8u);
    let a03 = load_held(qa + 12u);
    workgroupBarrier();
    stage_pairs_quarter(g, e0, 1u, tid);
    workgroupBarrier();
    let a10 = load_held(qa);
    let a11 = load_held(qa + 4u);
    let a12 = load_held(qa + 8u);
    let a13 = load_held(qa + 12u);
    workgroupBarrier();
    stage_pairs_quarter(g, e0, 2u, tid);
    workgroupBarrier();
    let a20 = load_held(qa);
    let a21 = load_held(qa + 4u);
    let a22 = load_held(qa + 8u);
    let a23 = load_held(qa + 12u);
    workgroupBarrier();
    stage_pairs_quarter(g, e0, 3u, tid);
    workgroupBarrier();
    let a30 = load_held(qa);
    let a31 = load_held(qa + 4u);
    let a32 = load_held(qa + 8u);
    let a33 = load_held(qa + 12u);
    if keys.x < keys.y {
        load_block(g, keys.x, tid);
    }
    // q and do are held, D's partials read: `tile` and `scores` may take the keys.
    workgroupBarrier();

    let rt = sg % 4u;
    let wa = 16u * rt * RW;
    let ka = (sg / 4u) * (HD / 8u);
    var acc0 = MatC();
    var acc1 = MatC();
    var acc2 = MatC();
    var acc3 = MatC();
    var acc4 = MatC();
    var acc5 = MatC();
    var acc6 = MatC();
    var acc7 = MatC();
    for (var j0 = keys.x; j0 < keys.y; j0 += BK) {
        store_block(tid);
        workgroupBarrier();
        if j0 + BK < keys.y {
            load_block(g, j0 + BK, tid);
        }
        score_tile(
            a00, a01, a02, a03, a10, a11, a12, a13,
            a20, a21, a22, a23, a30, a31, a32, a33, sg,
        );
        workgroupBarrier();
        wt[r * RW + c] = vec4<f16>(ds4(me, r, j0, 4u * c, li, delta));
        workgroupBarrier();
        let dw = load_w(wa);
        acc0 = mma(dw, load_b_rows(ka), acc0);
        acc1 = mma(dw, load_b_rows(ka + 4u), acc1);
        if HD >= 128u {
            acc2 = mma(dw, load_b_rows(ka + 8u), acc2);
            acc3 = mma(dw, load_b_rows(ka + 12u), acc3);
        }
        if HD >= 256u {
            acc4 = mma(dw, load_b_rows(ka + 16u), acc4);
            acc5 = mma(dw, load_b_rows(ka + 20u), acc5);
            acc6 = mma(dw, load_b_rows(ka + 24u), acc6);
            acc7 = mma(dw, load_b_rows(ka + 28u), acc7);
        }
        workgroupBarrier();
    }

    let dq_at = p.dq_offset + split * p.n * p.n_head * HD;
    let f = p.scale / DO_SCALE;
    put_rows(acc0, 0u, f, sg, tid, g, e0, dq_at);
    put_rows(acc1, 16u, f, sg, tid, g, e0, dq_at);
    if HD >= 128u {
        put_rows(acc2, 32u, f, sg, tid, g, e0, dq_at);
        put_rows(acc3, 48u, f, sg, tid, g, e0, dq_at);
    }
    if HD >= 256u {
        put_rows(acc4, 64u, f, sg, tid, g, e0, dq_at);
        put_rows(acc5, 80u, f, sg, tid, g, e0, dq_at);
        put_rows(acc6, 96u, f, sg, tid, g, e0, dq_at);
        put_rows(acc7, 112u, f, sg, tid, g, e0, dq_at);
    }
}

// Accumulator `acc` (dims dt .. dt + 15 of each subgroup's half), times `f`, into dq from
// `at`, the pairs inside, through `scores` (tile sg at 256 sg, row-major). Called by every
// invocation in uniform control flow (it holds barriers).
fn put_rows(acc: MatC, dt: u32, f: f32, sg: u32, tid: u32, g: u32, e0: u32, at: u32) {
    store_rows(acc, 256u * sg);
    workgroupBarrier();
    for (var u = 0u; u < 8u; u++) {
        let i = tid + WG * u;
        let t = i / 256u;
        let e = e0 + 16u * (t % 4u) + (i % 256u) / 16u;
        if e < pair_count() {
            dq[at + pair_row(g, e) * HD + (t / 4u) * (HD / 2u) + dt + i % 16u] = f * scores[i];
        }
    }
    workgroupBarrier();
}
