// Attention of query rows over a KV cache: decode (one token) and prompt blocks (causal), with
// GQA, a sliding window, a scale, an optional tanh soft-cap, and flash-decoding splits.
//
// Rows: the query heads that share kv head `kvh`, for every token: row r = t * group + g is
// head h = kvh * group + g of token t, at position pos[pos_offset + t]. It attends to keys
// j in [lo, at], lo = at + 1 - window (0 when window = 0 or at < window): causal by position,
// so a prompt block whose K/V are already in the cache is handled like decode.
// Workgroup (split, tile, kvh) of WG (64 for decode, 256 for prompt blocks): LANES = HD / 8
// lanes per row, ROWS = WG / LANES rows (256: 4x the rows share each key's loads, which then
// come from L1; 64 keeps decode's few rows from idling lanes);
// lane l holds 8 dims of q and of the output accumulator in registers (pairs 2l, 2l + 1 and
// HD/4 + 2l, HD/4 + 2l + 1: neighbouring lanes read neighbouring words), and the workgroup
// walks the keys of its split [split * split_len, +split_len) in tiles of BK = 16 with an
// online softmax (running max m and sum l; nothing n^2 is stored). Per tile: each lane forms
// partial dot products for 16 keys, the lanes of a row are summed by the entry file's
// `row_scores` (attention/entry_plain.wgsl: through workgroup memory and two barriers;
// attention/entry_subgroup.wgsl: subgroup shuffles, no barrier; its `tile_done` ends the
// tile), then every lane of the row rescales and accumulates p * v for its dims. The entry
// file's `main` numbers the invocations (`me`) and calls `attend`. Key loops are
// unrolled by hand 4 keys at a time, so 16 cache loads per lane are in flight together; the
// tile's v pairs are loaded at its top, with its keys, into 16 named values (`KvQuad`: the
// V round trip no longer waits for the score barriers; SmolLM2 decode -2.6% a step on the
// H100. Two private arrays of 16 vec4s instead were slower: not kept in registers).
// partial = 0: out[out_offset + (t * n_heads + h) * HD + d] = o / l (one split).
// partial = 1: record (o[HD], m, l) at ((t * n_heads + h) * n_splits + split) * (HD + 2), for
// attention/combine.wgsl. Cache access (`KvWord`, `kv_pair`) comes from
// kv_load_<dtype>.wgsl.
//
// The query comes from the included hook file, which also binds the caches, in two calls:
// `query_begin` before the key range (its loads travel with the positions'; it may write
// workgroup memory, which the range's barrier publishes) and `query_end` after it, which
// returns the lane's q and may set `fresh_at`, `fresh_k`, `fresh_v`: the token's own key at
// position fresh_at as the cache words the hook stores there, which the key loop takes
// instead of the cache's (its workgroup stores them, unordered with its loads; NO_KEY: none).
// Hooks: attention/q_plain.wgsl (q read as it is; caches read-only), attention/q_rope.wgsl
// and attention/q_rope_lanes.wgsl (one decode token: the per-head norm and RoPE of q and k
// done here, and the new k and v heads stored into the caches: head_norm_rope_kv folded in;
// their parameters are the fields after `softcap`). Params, the shared bindings and
// `row_keys`: attention/params.wgsl.

// Invocations per workgroup: 64 or 256.
override WG: u32 = 64u;
// Head dimension: 64, 128 or 256 (LANES = HD / 8 lanes of 8 dims per row).
override HD: u32 = 128u;
override LANES: u32 = HD / 8u;
override ROWS: u32 = WG / LANES;
const BK: u32 = 16u;
// Score of a masked key (and the running max before any key); exp(NONE - m) is 0.
const NONE: f32 = -3.0e38;

// A lane's 8 dims of its row's query: dims 4 lane .. 4 lane + 3 and HD/2 + 4 lane .. + 3.
struct Query {
    lo: vec4<f32>,
    hi: vec4<f32>,
}

// No fresh key (`fresh_at`).
const NO_KEY: u32 = 0xffffffffu;

// A tile's 16 scores of one row (or a lane's shares of them), keys 4i .. 4i + 3 in field i.
struct Tile {
    a: vec4<f32>,
    b: vec4<f32>,
    c: vec4<f32>,
    d: vec4<f32>,
}

var<workgroup> range_lo: u32;
var<workgroup> range_hi: u32;

// Pair index of (kv head row0 / max_len, position j) for a lane (lane_pair = 2 lane); j
// clamped into the cache (keys past `hi` are computed and then masked).
fn pair_at(row0: u32, j: u32, last: u32, lane_pair: u32) -> u32 {
    return (row0 + min(j, last)) * (HD / 2u) + lane_pair;
}

// This lane's 4 pairs of one key's k or v (pair index base `b` = row * HD/2 + 2 * lane), as
// the cache stores them: a tile's 16 v quads are loaded with its keys, before the score
// barriers, and held in registers (named, never indexed: 64 words a lane for an f16 cache).
struct KvQuad {
    lo0: KvWord,
    lo1: KvWord,
    hi0: KvWord,
    hi1: KvWord,
}

// The token's own key and its position (set by the hook's query_end; NO_KEY: none).
var<private> fresh_at: u32 = NO_KEY;
var<private> fresh_k: KvQuad;
var<private> fresh_v: KvQuad;

// `fresh` where `take`, else c.
fn quad_or(c: KvQuad, fresh: KvQuad, take: bool) -> KvQuad {
    return KvQuad(
        select(c.lo0, fresh.lo0, take),
        select(c.lo1, fresh.lo1, take),
        select(c.hi0, fresh.hi0, take),
        select(c.hi1, fresh.hi1, take),
    );
}

// The quad of key j at pair base b: the cache's, or the hook's fresh one at fresh_at.
fn k_quad(b: u32, j: u32) -> KvQuad {
    let c = KvQuad(kc[b], kc[b + 1u], kc[b + HD / 4u], kc[b + HD / 4u + 1u]);
    return quad_or(c, fresh_k, j == fresh_at);
}

fn v_quad(b: u32, j: u32) -> KvQuad {
    let c = KvQuad(vc[b], vc[b + 1u], vc[b + HD / 4u], vc[b + HD / 4u + 1u]);
    return quad_or(c, fresh_v, j == fresh_at);
}

// The lane's dims 4 lane .. + 3 (lo) and HD/2 + 4 lane .. + 3 (hi) of a quad.
fn quad_lo(v: KvQuad) -> vec4<f32> {
    return vec4<f32>(kv_pair(v.lo0), kv_pair(v.lo1));
}

fn quad_hi(v: KvQuad) -> vec4<f32> {
    return vec4<f32>(kv_pair(v.hi0), kv_pair(v.hi1));
}

// The lane's share of key j's score: its 8 dims of q against the key's (pair base b).
fn k_dot(b: u32, j: u32, q0: vec4<f32>, q1: vec4<f32>) -> f32 {
    let k = k_quad(b, j);
    return dot(quad_lo(k), q0) + dot(quad_hi(k), q1);
}

// 4 keys' weights w added to the row's sum l, and their w v to the lane's dims o0 (lo) and
// o1 (hi).
fn add4(
    w: vec4<f32>,
    a: KvQuad,
    b: KvQuad,
    c: KvQuad,
    d: KvQuad,
    l: ptr<function, f32>,
    o0: ptr<function, vec4<f32>>,
    o1: ptr<function, vec4<f32>>,
) {
    *l += w.x + w.y + w.z + w.w;
    *o0 += w.x * quad_lo(a) + w.y * quad_lo(b) + w.z * quad_lo(c) + w.w * quad_lo(d);
    *o1 += w.x * quad_hi(a) + w.y * quad_hi(b) + w.z * quad_hi(c) + w.w * quad_hi(d);
}

// Softmax weights of 4 of the row's scores; masked keys weigh 0 (their clamped cache rows
// are finite).
fn weights4(sv: vec4<f32>, m: f32) -> vec4<f32> {
    return select(exp(sv - m), vec4<f32>(0.0), sv <= vec4<f32>(NONE));
}

// A row's total score of key `key` finished: scaled, soft-capped, and NONE where the row
// does not see the key (past `hi`: another split's, or a clamped row).
fn finish_score(total: f32, key: u32, keys: vec2<u32>, valid: bool, hi: u32) -> f32 {
    var s = total * p.scale;
    if p.softcap > 0.0 {
        s = p.softcap * tanh(s / p.softcap);
    }
    if !valid || key < keys.x || key >= keys.y || key >= hi {
        s = NONE;
    }
    return s;
}

// The lane's shares of 4 keys' scores (keys j .. j + 3).
fn dots4(row0: u32, j: u32, last: u32, lane_pair: u32, q0: vec4<f32>, q1: vec4<f32>) -> vec4<f32> {
    return vec4<f32>(
        k_dot(pair_at(row0, j, last, lane_pair), j, q0, q1),
        k_dot(pair_at(row0, j + 1u, last, lane_pair), j + 1u, q0, q1),
        k_dot(pair_at(row0, j + 2u, last, lane_pair), j + 2u, q0, q1),
        k_dot(pair_at(row0, j + 3u, last, lane_pair), j + 3u, q0, q1),
    );
}

fn max4(v: vec4<f32>) -> f32 {
    return max(max(v.x, v.y), max(v.z, v.w));
}

// The workgroup's work: `me` numbers the invocation (its row me / LANES and lane me % LANES),
// as the entry file's `main` chooses.
fn attend(wid: vec3<u32>, me: u32) {
    let split = wid.x;
    let tile = wid.y;
    let kvh = wid.z;
    let rl = me / LANES;
    let lane = me % LANES;
    let n_rows = p.n_tokens * p.group;
    let row = tile * ROWS + rl;
    let valid = row < n_rows;
    let rc = min(row, n_rows - 1u);
    let t = rc / p.group;
    let h = kvh * p.group + rc % p.group;
    let keys = row_keys(rc);

    // Called by every invocation in uniform control flow (a hook may have barriers), before
    // the key range: q's loads do not depend on the positions, so they travel with the
    // position loads below instead of after them (one round trip to memory fewer).
    query_begin(t, h, split, tile, kvh, lane, me);

    // The keys any row of this tile needs, within this split.
    if me == 0u {
        var lo = 0xffffffffu;
        var hi = 0u;
        for (var r = tile * ROWS; r < min(tile * ROWS + ROWS, n_rows); r++) {
            let b = row_keys(r);
            lo = min(lo, b.x);
            hi = max(hi, b.y);
        }
        range_lo = max(lo, split * p.split_len);
        range_hi = min(hi, (split + 1u) * p.split_len);
    }
    let lo = workgroupUniformLoad(&range_lo);
    let hi = workgroupUniformLoad(&range_hi);
    // After that barrier: the hook's workgroup memory is written.
    let q = query_end(split, kvh, lane, me);
    let q0 = q.lo;
    let q1 = q.hi;

    var o0 = vec4<f32>(0.0);
    var o1 = vec4<f32>(0.0);
    var m = NONE;
    var l = 0.0;
    let last = p.max_len - 1u;
    let lane_pair = 2u * lane;
    let row0 = kvh * p.max_len;

    for (var kb = lo; kb < hi; kb += BK) {
        let v0 = v_quad(pair_at(row0, kb, last, lane_pair), kb);
        let v1 = v_quad(pair_at(row0, kb + 1u, last, lane_pair), kb + 1u);
        let v2 = v_quad(pair_at(row0, kb + 2u, last, lane_pair), kb + 2u);
        let v3 = v_quad(pair_at(row0, kb + 3u, last, lane_pair), kb + 3u);
        let v4 = v_quad(pair_at(row0, kb + 4u, last, lane_pair), kb + 4u);
        let v5 = v_quad(pair_at(row0, kb + 5u, last, lane_pair), kb + 5u);
        let v6 = v_quad(pair_at(row0, kb + 6u, last, lane_pair), kb + 6u);
        let v7 = v_quad(pair_at(row0, kb + 7u, last, lane_pair), kb + 7u);
        let v8 = v_quad(pair_at(row0, kb + 8u, last, lane_pair), kb + 8u);
        let v9 = v_quad(pair_at(row0, kb + 9u, last, lane_pair), kb + 9u);
        let v10 = v_quad(pair_at(row0, kb + 10u, last, lane_pair), kb + 10u);
        let v11 = v_quad(pair_at(row0, kb + 11u, last, lane_pair), kb + 11u);
        let v12 = v_quad(pair_at(row0, kb + 12u, last, lane_pair), kb + 12u);
        let v13 = v_quad(pair_at(row0, kb + 13u, last, lane_pair), kb + 13u);
        let v14 = v_quad(pair_at(row0, kb + 14u, last, lane_pair), kb + 14u);
        let v15 = v_quad(pair_at(row0, kb + 15u, last, lane_pair), kb + 15u);
        let dots = Tile(
            dots4(row0, kb, last, lane_pair, q0, q1),
            dots4(row0, kb + 4u, last, lane_pair, q0, q1),
            dots4(row0, kb + 8u, last, lane_pair, q0, q1),
            dots4(row0, kb + 12u, last, lane_pair, q0, q1),
        );
        let sc = row_scores(dots, me, rl, lane, kb, keys, valid, hi);
        let mt = max(max(max4(sc.a), max4(sc.b)), max(max4(sc.c), max4(sc.d)));
        let mn = max(m, mt);
        let c = exp(m - mn);
        l *= c;
        o0 *= c;
        o1 *= c;
        m = mn;
        add4(weights4(sc.a, m), v0, v1, v2, v3, &l, &o0, &o1);
        add4(weights4(sc.b, m), v4, v5, v6, v7, &l, &o0, &o1);
        add4(weights4(sc.c, m), v8, v9, v10, v11, &l, &o0, &o1);
        add4(weights4(sc.d, m), v12, v13, v14, v15, &l, &o0, &o1);
        tile_done();
    }

    if !valid {
        return;
    }
    let hr = t * p.n_heads + h;
    var dst = p.out_offset + hr * HD;
    if p.partial == 1u {
        dst = (hr * p.n_splits + split) * (HD + 2u);
    }
    var scale = 1.0;
    if p.partial == 0u {
        scale = select(0.0, 1.0 / l, l > 0.0);
    }
    let d0 = dst + 4u * lane;
    let d1 = d0 + HD / 2u;
    for (var i = 0u; i < 4u; i++) {
        out[d0 + i] = o0[i] * scale;
        out[d1 + i] = o1[i] * scale;
    }
    if p.partial == 1u && lane == 0u {
        out[dst + HD] = m;
        out[dst + HD + 1u] = l;
    }
}
