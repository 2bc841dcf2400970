// Prompt-block attention on the tensor cores: the contract of attention.wgsl for one split
// (causal by position, GQA, sliding window, scale, soft-cap; out[out_offset + (t * n_heads +
// h) * HD + d]) over an f16 cache, with q rounded to f16 and the products on 16 x 16 x 16
// cooperative matrices (f16 operands, f32 sums). The types and the product (MatA, MatB, MatC,
// coop_lane, mma) come from common/coop_ops.wgsl, the loads and stores (load_held, load_w,
// load_bt, load_b_rows, store_scores, store_rows) from attention/coop_io.wgsl, or in the
// tests' emulation from common/coop_emul.wgsl and attention/coop_io_emul.wgsl.
//
// One workgroup of 256 invocations = 8 subgroups of 32 per (tile of TR = 64 query rows, kv
// head kvh); row r = t * group + g is head kvh * group + g of token t, as in attention.wgsl.
// The last tiles first: their rows see the most keys (causal), so started last they would run
// on alone at the end (docs/PERF.md, D-two-units-a-barrier). Subgroup s owns row tile s % 4
// (16 rows). The rows' q is staged once through `tile` (half of the dims at a time: 64 rows of
// HD values do not fit beside the rest) and held in registers as HD / 16 A operands. The keys
// the tile sees are walked in blocks of BK = 32 copied from the cache into `tile`: subgroup s
// computes the 16 x 16 score tile of its rows and the block's key tile s / 4 over all of the
// dims, into `scores` (f32); the plain code (invocation i: row i % 64, keys 8 (i / 64) .. + 7
// of the block) applies the scale, soft-cap and masks. A staged key feeds 64 rows (a 16-row
// tiling reading K and V straight from the cache fed 16 and left the kernel bound by its
// blocks' latency).
//
// One pass over the blocks, with the output accumulators never rescaled (a cooperative
// matrix's elements cannot be addressed by row): each row's weights are P = exp(s - m) with m
// its reference, the max over its first block with a key it sees (through `part_max`, from
// its four invocations), and O = sum P V accumulates unnormalised (rows divided by their sums
// l where they are stored, `row_scale`). Each block: the scores, then P rounded to f16 into
// `wt`, V staged in place of K, P V added into f32 accumulators (subgroup s owning its row
// tile's dims (s / 4) HD / 2 .. + HD / 2, HD / 32 accumulators). A later score above m +
// HEADROOM (P past e^10, where f16 tops out at e^11.1) flags the tile, which then starts over
// with m each row's max over all of its keys (`row_max`, a pass over the scores alone: each of
// a row's 4 invocations over its 8 keys of every block), which no score passes. Rescaling
// through workgroup memory instead would move the 64 x HD accumulators there and back at
// every block (64 KiB at HD 256, more than fits).
//
// Each block's cache reads overlap the products before it: an invocation loads its share of
// the next rows (the block's V during its scores, the next block's K during P V) into
// registers (`staged_words`) and stores them to `tile` after the barrier that frees it. The
// cache is read 16 bytes at a time (eight f16 values; a key's HD values start 16-byte aligned
// since HD >= 64); keys at or past the end of the keys walked are staged as zeros (never read,
// so a block may run past the cache's end). Masked keys weigh exactly 0 and the cache holds
// finite values everywhere (zeros where never written), so they add nothing to O. Every coop
// op is reached in uniform control flow (loop bounds and the fallback come from
// workgroupUniformLoad, HD is an override).
//
// Split keys (p.n_splits > 1, the grid's z): split s walks its share of the tile's keys
// (`split_share`, whole blocks) and leaves its rows' unnormalised output (P = exp(s - m), not
// divided by l) at out_offset + s * n_tokens * n_heads * HD in out's layout, and its maxima and
// references and sums at records + s * R and records + (n_splits + s) * R (R = n_tokens *
// n_heads rows, row t * n_heads + h): attention/train_combine.wgsl rescales them into the
// output. A prompt block of few row tiles (a model with one kv head) has too few workgroups to
// fill the GPU unsplit, and its last tiles would each walk all of the keys alone. Workgroup
// memory at HD 256: `tile` 16.5 KiB, `scores` 8 KiB, `wt` 5 KiB, `part_max` 1 KiB, under
// lavapipe's 32 KiB (the tests run the emulated body there).
// Precision: q and P rounded to f16 (one f16 ulp each; P at most e^10, so never past f16's
// range, and no smaller than the normalised weights, whose subnormals would lose more),
// the cache's values exact, products exact in f32 and summed in f32 by the tensor cores; m, l,
// the scale, the soft-cap and the division by l in f32 plain arithmetic (docs/KERNELS.md has
// the bound).
// Params, the shared bindings and `row_keys`: attention/params.wgsl; the 64-row tile (its
// workgroup memory, `score_tile`): attention/coop_forward_tile.wgsl, shared with the training
// forward; the caches and their staging here.

// The f16 caches as 16-byte words (eight values, the low half of each word first): one load
// an invocation moves twice the bytes of a vec4<f16> (docs/PERF.md, D-staged-registers).
@group(0) @binding(2) var<storage, read> kc: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read> vc: array<vec4<u32>>;

// Score of a masked key (and the running max before any key); exp(NONE - m) is 0.
const NONE: f32 = -3.0e38;
// The tile's keys (x .. y), the start-over flag (z) and the last first key of its rows (w); a
// vec4 so that every workgroup variable is a multiple of 16 bytes (a scalar among them may
// leave the coop tiles only 8-byte aligned: docs/KERNELS.md).
var<workgroup> key_range: vec4<u32>;
// A later score above the row's reference by more than this starts the tile over against the
// rows' maxima: its weight would pass e^10 ~ 22,026, a third of f16's largest.
const HEADROOM: f32 = 10.0;
// Each invocation's max over its keys of a block (row r, part c at TR c + r), then its sum.
var<workgroup> part_max: array<f32, WG>;
// Each row's factor on its way out: 1 / its sum (unsplit), 1 (split).
var<workgroup> row_scale: array<f32, TR>;

// `tile` from dims h HD / 2 .. + HD / 2 of the q rows row0 .. row0 + 63 of kv head kvh
// (zeros past the block's rows), QS vec4s a row.
fn stage_q_half(kvh: u32, row0: u32, h: u32, tid: u32) {
    let n_rows = p.n_tokens * p.group;
    for (var i = tid; i < TR * QS; i += WG) {
        let r = i / QS;
        let row = row0 + r;
        var a = vec4<f32>(0.0);
        if row < n_rows {
            let head = kvh * p.group + row % p.group;
            let b = p.q_offset + (row / p.group) * p.q_stride + head * HD + h * (HD / 2u)
                + 4u * (i % QS);
            a = vec4<f32>(qv[b], qv[b + 1u], qv[b + 2u], qv[b + 3u]);
        }
        tile[i] = vec4<f16>(a);
    }
}

// This invocation's share of the next block's rows, as loaded (HD / 64 words of 8 values),
// until store_block converts them into `tile`: only constant indices (the reason
// attention/coop_stage.wgsl gives; that file's staging is for vec4<f16> shares).
var<private> staged_words: array<vec4<u32>, 4>;

// Word u of this invocation's K (`from_v`: V) rows of the block at key j0; `head` is the
// cache's word index of the kv head's first value, `hi` the end of the keys walked (zeros
// from there; hi > 0). The load clamps into bounds and selects: no branch around it.
fn load_share(head: u32, j0: u32, hi: u32, from_v: bool, tid: u32, u: u32) -> vec4<u32> {
    let i = tid + WG * u;
    let key = j0 + i / (HD / 8u);
    let at = head + min(key, hi - 1u) * (HD / 8u) + i % (HD / 8u);
    var a: vec4<u32>;
    if from_v {
        a = vc[at];
    } else {
        a = kc[at];
    }
    return select(vec4<u32>(0u), a, key < hi);
}

// This invocation's share of the 32 K rows (`from_v`: V rows) of the block at key j0 into
// `staged_words`.
fn load_block(head: u32, j0: u32, hi: u32, from_v: bool, tid: u32) {
    staged_words[0] = load_share(head, j0, hi, from_v, tid, 0u);
    if HD >= 128u {
        staged_words[1] = load_share(head, j0, hi, from_v, tid, 1u);
    }
    if HD >= 256u {
        staged_words[2] = load_share(head, j0, hi, from_v, tid, 2u);
        staged_words[3] = load_share(head, j0, hi, from_v, tid, 3u);
    }
}

// Word u of `staged_words` into `tile` as two vec4<f16>; the values go through f32
// (unpack2x16float), exactly: naga 30 rejects the bitcast of two words to vec4<f16>.
fn store_word(tid: u32, u: u32) {
    let i = tid + WG * u;
    let at = (i / (HD / 8u)) * RS + 2u * (i % (HD / 8u));
    let q = staged_words[u];
    tile[at] = vec4<f16>(vec4<f32>(unpack2x16float(q.x), unpack2x16float(q.y)));
    tile[at + 1u] = vec4<f16>(vec4<f32>(unpack2x16float(q.z), unpack2x16float(q.w)));
}

// `staged_words` into `tile` (after a barrier that frees it).
fn store_block(tid: u32) {
    store_word(tid, 0u);
    if HD >= 128u {
        store_word(tid, 1u);
    }
    if HD >= 256u {
        store_word(tid, 2u);
        store_word(tid, 3u);
    }
}

// The four scores of keys j0 + c0 .. c0 + 3 for tile row r (seeing keys [keys.x, keys.y),
// none unless `valid`): scaled, soft-capped, NONE where the row does not see the key.
fn block_scores(j0: u32, r: u32, c0: u32, keys: vec2<u32>, valid: bool) -> vec4<f32> {
    var s = p.scale * vec4<f32>(
        scores[SC * c0 + r],
        scores[SC * (c0 + 1u) + r],
        scores[SC * (c0 + 2u) + r],
        scores[SC * (c0 + 3u) + r],
    );
    if p.softcap > 0.0 {
        s = p.softcap * tanh(s / p.softcap);
    }
    let js = vec4<u32>(j0 + c0) + vec4<u32>(0u, 1u, 2u, 3u);
    let vis = vec4<bool>(valid) & (js >= vec4<u32>(keys.x)) & (js < vec4<u32>(keys.y));
    return select(vec4<f32>(NONE), s, vis);
}

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) tid: u32,
) {
    let sg = tid / 32u;
    coop_lane(tid % 32u);
    let kvh = wid.y;
    let n_rows = p.n_tokens * p.group;
    let row0 = (nwg.x - 1u - wid.x) * TR;
    let split = wid.z;
    let head = kvh * p.max_len * (HD / 8u);
    // This subgroup's row tile, and its key tile of a block (scores) or half of the dims (P V).
    let rt = sg % 4u;
    let half = sg / 4u;
    stage_q_half(kvh, row0, 0u, tid);
    // The keys any row of the tile sees (a row's keys depend on its token only).
    if tid == 0u {
        var lo = 0xffffffffu;
        var hi = 0u;
        var first = 0u;
        let t_end = (min(row0 + TR, n_rows) - 1u) / p.group + 1u;
        for (var t = row0 / p.group; t < t_end; t++) {
            let b = row_keys(t * p.group);
            lo = min(lo, b.x);
            hi = max(hi, b.y);
            first = max(first, b.x);
        }
        key_range = vec4<u32>(lo, hi, 0u, first);
    }
    // Uniform for the loops' barriers (pos[] is a storage read); also the barrier after q.
    let range = workgroupUniformLoad(&key_range);
    // This split's keys (all of the tile's unsplit; none without rows).
    var keys_s = vec2<u32>(range.y, range.y);
    if range.x < range.y {
        keys_s = split_share(range.x, range.y, BK, p.n_splits, split);
    }
    let lo = keys_s.x;
    let hi = keys_s.y;
    // The block of the last first key any row of the tile sees in this split.
    let first_key = max(range.w, lo);
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
    stage_q_half(kvh, row0, 1u, tid);
    workgroupBarrier();
    let b0 = load_held(qa);
    let b1 = load_held(qa + 4u);
    let b2 = load_held(qa + 8u);
    let b3 = load_held(qa + 12u);
    let b4 = load_held(qa + 16u);
    let b5 = load_held(qa + 20u);
    let b6 = load_held(qa + 24u);
    let b7 = load_held(qa + 28u);
    if lo < hi {
        load_block(head, lo, hi, false, tid);
    }
    // q is held: `tile` may take the keys.
    workgroupBarrier();

    // Plain-code role: row row0 + r, keys 8 c .. 8 c + 7 of each block.
    let r = tid % TR;
    let c = tid / TR;
    let row = row0 + r;
    let valid = row < n_rows;
    let keys = row_keys(min(row, n_rows - 1u));
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

    // P = exp(s - m) against each row's reference m, O = sum P V unnormalised (divided by the
    // row's sum where it is stored). First m is the row's max over its first block with a key
    // it sees; where a later score passes it by HEADROOM, the tile starts over with m the
    // row's max over all of its keys (`row_max`), which no score passes.
    var m = NONE;
    var l = 0.0;
    for (var attempt = 0u; attempt < 2u; attempt++) {
        if attempt == 1u {
            o0 = MatC();
            o1 = MatC();
            o2 = MatC();
            o3 = MatC();
            o4 = MatC();
            o5 = MatC();
            o6 = MatC();
            o7 = MatC();
            l = 0.0;
            m = row_max(head, lo, hi, r, c, keys, valid, tid, rt, half,
                a0, a1, a2, a3, a4, a5, a6, a7, b0, b1, b2, b3, b4, b5, b6, b7);
            // The attempt starts from the first block's K.
            if lo < hi {
                load_block(head, lo, hi, false, tid);
            }
        }
        for (var j0 = lo; j0 < hi; j0 += BK) {
            store_block(tid);
            workgroupBarrier();
            load_block(head, j0, hi, true, tid);
            score_tile(a0, a1, a2, a3, a4, a5, a6, a7, b0, b1, b2, b3, b4, b5, b6, b7, rt, half);
            workgroupBarrier();
            let s0 = block_scores(j0, r, 8u * c, keys, valid);
            let s1 = block_scores(j0, r, 8u * c + 4u, keys, valid);
            let s01 = max(s0, s1);
            let mine = max(max(s01.x, s01.y), max(s01.z, s01.w));
            // The scores' products are done with K: V takes its place.
            store_block(tid);
            // Up to the block of the last row's first key, rows without a reference take one:
            // the max of their first block with a key they see (until then their O is zero,
            // so any reference will do), from the row's four invocations through `part_max`.
            if j0 <= first_key {
                part_max[tid] = mine;
                workgroupBarrier();
                if m == NONE {
                    m = row_part_max(r);
                }
            }
            if mine > m + HEADROOM {
                key_range.z = 1u;
            }
            let w0 = select(vec4<f32>(0.0), exp(s0 - m), s0 > vec4<f32>(NONE));
            let w1 = select(vec4<f32>(0.0), exp(s1 - m), s1 > vec4<f32>(NONE));
            l += ((w0.x + w0.y) + (w0.z + w0.w)) + ((w1.x + w1.y) + (w1.z + w1.w));
            wt[r * RW + 2u * c] = vec4<f16>(w0);
            wt[r * RW + 2u * c + 1u] = vec4<f16>(w1);
            if j0 + BK < hi {
                load_block(head, j0 + BK, hi, false, tid);
            }
            // The barrier before the products read `wt` and V; a score past the headroom
            // leaves them for the second attempt.
            if workgroupUniformLoad(&key_range).z != 0u {
                break;
            }
            pv(wa, va, &o0, &o1, &o2, &o3, &o4, &o5, &o6, &o7);
            workgroupBarrier();
        }
        if workgroupUniformLoad(&key_range).z == 0u {
            break;
        }
        // Every invocation has read the flag before it is cleared; row_max's barriers order
        // the clearing before any later read.
        workgroupBarrier();
        if tid == 0u {
            key_range.z = 0u;
        }
        if lo < hi {
            load_block(head, lo, hi, false, tid);
        }
    }
    // The row's sum: its 4 invocations' partials, all against its reference.
    part_max[tid] = l;
    workgroupBarrier();
    let lr = (part_max[r] + part_max[r + TR]) + (part_max[r + 2u * TR] + part_max[r + 3u * TR]);

    // Unsplit, each row divided by its sum where it is stored; split, its reference and sum
    // recorded for attention/train_combine.wgsl.
    let split_out = p.n_splits > 1u;
    if tid < TR {
        row_scale[tid] = select(1.0, 1.0 / lr, !split_out && lr > 0.0);
    }
    if split_out && tid < TR && valid {
        let t_rows = p.n_tokens * p.n_heads;
        let at = (row / p.group) * p.n_heads + kvh * p.group + row % p.group;
        out[p.records + split * t_rows + at] = m;
        out[p.records + (p.n_splits + split) * t_rows + at] = lr;
    }

    let o_at = p.out_offset + split * p.n_tokens * p.n_heads * HD;
    // Orders the partials' reads (and, without keys, everything before) before `put_o`'s
    // stores.
    workgroupBarrier();
    put_o(o0, 0u, sg, tid, kvh, row0, o_at);
    put_o(o1, 16u, sg, tid, kvh, row0, o_at);
    if HD >= 128u {
        put_o(o2, 32u, sg, tid, kvh, row0, o_at);
        put_o(o3, 48u, sg, tid, kvh, row0, o_at);
    }
    if HD >= 256u {
        put_o(o4, 64u, sg, tid, kvh, row0, o_at);
        put_o(o5, 80u, sg, tid, kvh, row0, o_at);
        put_o(o6, 96u, sg, tid, kvh, row0, o_at);
        put_o(o7, 112u, sg, tid, kvh, row0, o_at);
    }
}

// The max of row row0 + r's scores over keys [lo, hi) (NONE where it sees none): each of its 4
// invocations over its 8 keys of every block, combined through `part_max`. Starts from the
// first block's K in `staged_words`; called in uniform control flow (it holds barriers).
fn row_max(
    head: u32, lo: u32, hi: u32, r: u32, c: u32, keys: vec2<u32>, valid: bool, tid: u32,
    rt: u32, half: u32,
    a0: MatA, a1: MatA, a2: MatA, a3: MatA, a4: MatA, a5: MatA, a6: MatA, a7: MatA,
    b0: MatA, b1: MatA, b2: MatA, b3: MatA, b4: MatA, b5: MatA, b6: MatA, b7: MatA,
) -> f32 {
    var m = NONE;
    for (var j0 = lo; j0 < hi; j0 += BK) {
        store_block(tid);
        workgroupBarrier();
        if j0 + BK < hi {
            load_block(head, j0 + BK, hi, false, tid);
        }
        score_tile(a0, a1, a2, a3, a4, a5, a6, a7, b0, b1, b2, b3, b4, b5, b6, b7, rt, half);
        workgroupBarrier();
        let s0 = block_scores(j0, r, 8u * c, keys, valid);
        let s01 = max(s0, block_scores(j0, r, 8u * c + 4u, keys, valid));
        m = max(m, max(max(s01.x, s01.y), max(s01.z, s01.w)));
    }
    // The last block's scores are read, and every part_max read of the tile's first attempt.
    workgroupBarrier();
    part_max[tid] = m;
    workgroupBarrier();
    return row_part_max(r);
}

// The max of row r's 4 invocations' values in `part_max`.
fn row_part_max(r: u32) -> f32 {
    let a = max(part_max[r], part_max[r + TR]);
    return max(a, max(part_max[r + 2u * TR], part_max[r + 3u * TR]));
}

// The block's P V into the accumulators: subgroup (row tile rt, half) takes P's 16 rows at
// `wa` of `wt` and its half of the dims of V (`va`) from `tile`.
fn pv(
    wa: u32, va: u32,
    o0: ptr<function, MatC>, o1: ptr<function, MatC>, o2: ptr<function, MatC>,
    o3: ptr<function, MatC>, o4: ptr<function, MatC>, o5: ptr<function, MatC>,
    o6: ptr<function, MatC>, o7: ptr<function, MatC>,
) {
    for (var kt = 0u; kt < 2u; kt++) {
        let a = load_w(wa + 4u * kt);
        let at = 16u * kt * RS + va;
        *o0 = mma(a, load_b_rows(at), *o0);
        *o1 = mma(a, load_b_rows(at + 4u), *o1);
        if HD >= 128u {
            *o2 = mma(a, load_b_rows(at + 8u), *o2);
            *o3 = mma(a, load_b_rows(at + 12u), *o3);
        }
        if HD >= 256u {
            *o4 = mma(a, load_b_rows(at + 16u), *o4);
            *o5 = mma(a, load_b_rows(at + 20u), *o5);
            *o6 = mma(a, load_b_rows(at + 24u), *o6);
            *o7 = mma(a, load_b_rows(at + 28u), *o7);
        }
    }
}

// Accumulator `acc` (dims dt .. dt + 15 of each subgroup's half) into out from `o_at`, the rows
// inside the block, through `scores` (subgroup s's tile at 256 s, row-major): the rows of a tile are
// not evenly spaced in `out`. Called by every invocation in uniform control flow (it holds
// barriers).
fn put_o(acc: MatC, dt: u32, sg: u32, tid: u32, kvh: u32, row0: u32, o_at: u32) {
    store_rows(acc, 256u * sg);
    workgroupBarrier();
    let n_rows = p.n_tokens * p.group;
    for (var u = 0u; u < 8u; u++) {
        let i = tid + WG * u;
        let s = i / 256u;
        let row = row0 + 16u * (s % 4u) + (i % 256u) / 16u;
        if row < n_rows {
            let h = kvh * p.group + row % p.group;
            let d = (s / 4u) * (HD / 2u) + dt + i % 16u;
            let scale = row_scale[16u * (s % 4u) + (i % 256u) / 16u];
            out[o_at + ((row / p.group) * p.n_heads + h) * HD + d] = scores[i] * scale;
        }
    }
    workgroupBarrier();
}
