// Attention of query rows over a KV cache: decode (one token) and prompt blocks (causal), with
// GQA, a sliding window, a scale, an optional tanh soft-cap, and flash-decoding splits.
//
// Rows: the query heads that share kv head `kvh`, for every token: row r = t * group + g is
// head h = kvh * group + g of token t, at position pos[pos_offset + t]. It attends to keys
// j in [lo, at], lo = at + 1 - window (0 when window = 0 or at < window): causal by position,
// so a prompt block whose K/V are already in the cache is handled like decode.
// Workgroup (split, tile, kvh) of WG = 256 invocations in KEY_GROUPS key groups: LANES = HD / 8
// lanes per row, ROWS = WG / (LANES * KEY_GROUPS) rows. Prompt blocks take one key group (4x
// the rows of decode share each key's loads, which then come from L1); decode takes 4 groups
// of 64 invocations over the same rows, group g walking tiles g, g + 4, .. of the split, so
// a split is 4 tiles wide for the latency of one (the groups' states merge through workgroup
// memory at the end, `merge_groups`).
// Lane l holds 8 dims of q and of the output accumulator in registers (pairs 2l, 2l + 1 and
// HD/4 + 2l, HD/4 + 2l + 1: neighbouring lanes read neighbouring words), and its key group
// walks its tiles of BK = 16 keys of the split [split * split_len, +split_len) with an
// online softmax (running max m and sum l; nothing n^2 is stored). Per tile: each lane forms
// partial dot products for 16 keys, the lanes of a row are summed by the entry file's
// `row_scores` (attention/entry_plain.wgsl: through workgroup memory and two barriers;
// attention/entry_subgroup.wgsl: subgroup shuffles, no barrier; its `tile_done` ends the
// tile), then every lane of the row rescales and accumulates p * v for its dims. The entry
// file's `main` numbers the invocations (`me`) and calls `attend`. Key loops are
// unrolled by hand 4 keys at a time, so 16 cache loads per lane are in flight together; the
// tile's v pairs are loaded at its top, with its keys, into 16 named values (`KvQuad`: the
// V round trip does not wait for the score barriers; docs/PERF.md, D-v-with-k. Two private
// arrays of 16 vec4s are not kept in registers: X-v-arrays).
// One split (n_splits = 1): out[out_offset + (t * n_heads + h) * HD + d] = o / l.
// Several: the split's record (o's HD values lane-major, see `take4`, then m and l) goes to
// `splits` at records + ((t * n_heads + h) * n_splits + split) * (HD + 2), and the last workgroup of each (tile, kvh) to finish (an
// arrival counter at splits[kvh * tiles + tile]) merges the records of its rows into out.
// That workgroup reads records other workgroups wrote in this dispatch, so records and
// counters are atomics (coherent across workgroups), a storage barrier orders each
// workgroup's records before its arrival, and another orders the last one's loads after it
// (naga emits storageBarrier with device memory scope, which WGSL itself does not promise:
// xtask's test `storage_barrier_has_device_scope` pins it). The counter is left at 0 for the
// next dispatch. The merge is done here rather than by a dispatch of its own: one dispatch
// fewer a layer at about that dispatch's cost (docs/PERF.md, D-attention-merge). Cache access
// (`KvWord`, `kv_pair`) comes from kv_load_<dtype>.wgsl.
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

// Invocations per workgroup (256).
override WG: u32 = 256u;
// Head dimension: 64, 128 or 256 (LANES = HD / 8 lanes of 8 dims per row).
override HD: u32 = 128u;
// Groups of invocations over the same rows, each taking every KEY_GROUPS-th tile: 1 or 4.
override KEY_GROUPS: u32 = 1u;
override LANES: u32 = HD / 8u;
override ROWS: u32 = WG / (LANES * KEY_GROUPS);
// Row slots of the workgroup: ROWS in each key group.
override ROW_SLOTS: u32 = WG / LANES;
// Keys of a tile (Rust: `attention::KEY_TILE`).
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
var<workgroup> last_split: bool;

// Arrival counters, then the splits' records (f32 bits), when n_splits > 1.
@group(0) @binding(11) var<storage, read_write> splits: array<atomic<u32>>;

// The row within its tile of invocation `me` (the same in every key group).
fn row_in_tile(me: u32) -> u32 {
    return (me / LANES) % ROWS;
}

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

// An online softmax's state over some keys: running max m, sum l of e^(s - m), and the
// lane's 8 dims of sum e^(s - m) v.
struct Softmax {
    m: f32,
    l: f32,
    o0: vec4<f32>,
    o1: vec4<f32>,
}

// The state over no keys (exp(NONE - m) weighs it nothing in a merge).
const EMPTY = Softmax(NONE, 0.0, vec4<f32>(0.0), vec4<f32>(0.0));

// `a` and `b` over the union of their keys.
fn merged(a: Softmax, b: Softmax) -> Softmax {
    let m = max(a.m, b.m);
    let ca = exp(a.m - m);
    let cb = exp(b.m - m);
    return Softmax(m, a.l * ca + b.l * cb, a.o0 * ca + b.o0 * cb, a.o1 * ca + b.o1 * cb);
}

// merge_groups' slots: (m, l) a row slot (the same in each lane of a row), o a lane.
override GROUP_O: u32 = 2u * WG;
var<workgroup> group_ml: array<vec2<f32>, ROW_SLOTS>;
var<workgroup> group_o: array<vec4<f32>, GROUP_O>;

// Every lane's state merged over the KEY_GROUPS lanes that hold the same row and dims, in
// group order (called in uniform control flow; identity for one group).
fn merge_groups(s: Softmax, me: u32) -> Softmax {
    if KEY_GROUPS == 1u {
        return s;
    }
    if me % LANES == 0u {
        group_ml[me / LANES] = vec2<f32>(s.m, s.l);
    }
    group_o[2u * me] = s.o0;
    group_o[2u * me + 1u] = s.o1;
    workgroupBarrier();
    let stride = WG / KEY_GROUPS;
    let first = me % stride;
    var r = EMPTY;
    for (var g = 0u; g < KEY_GROUPS; g++) {
        let i = first + g * stride;
        let ml = group_ml[i / LANES];
        r = merged(r, Softmax(ml.x, ml.y, group_o[2u * i], group_o[2u * i + 1u]));
    }
    // The slots are written again by a later merge.
    workgroupBarrier();
    return r;
}

fn put(i: u32, v: f32) {
    atomicStore(&splits[i], bitcast<u32>(v));
}

fn take(i: u32) -> f32 {
    return bitcast<f32>(atomicLoad(&splits[i]));
}

// A record holds o lane-major: value i of lane l (o0[i], then o1[i - 4]) at i * LANES + l,
// so that each of a warp's 8 accesses covers consecutive words (atomics are not vectorized),
// then m and l.
fn take4(i: u32) -> vec4<f32> {
    return vec4<f32>(take(i), take(i + LANES), take(i + 2u * LANES), take(i + 3u * LANES));
}

fn put4(i: u32, v: vec4<f32>) {
    put(i, v.x);
    put(i + LANES, v.y);
    put(i + 2u * LANES, v.z);
    put(i + 3u * LANES, v.w);
}

// Where the record of split s of row hr starts.
fn record_at(hr: u32, s: u32) -> u32 {
    return p.records + (hr * p.n_splits + s) * (HD + 2u);
}

// The record of split s of row hr at lane `lane`'s dims, or nothing past the last split.
fn record(hr: u32, s: u32, lane: u32) -> Softmax {
    let at = record_at(hr, min(s, p.n_splits - 1u));
    let o0 = take4(at + lane);
    let o1 = take4(at + 4u * LANES + lane);
    let ml = vec2<f32>(take(at + HD), take(at + HD + 1u));
    if s >= p.n_splits {
        return EMPTY;
    }
    return Softmax(ml.x, ml.y, o0, o1);
}

// The workgroup's work: `me` numbers the invocation (its row slot me / LANES, lane me % LANES,
// key group me / (ROWS * LANES)), as the entry file's `main` chooses.
fn attend(wid: vec3<u32>, me: u32) {
    let split = wid.x;
    let tile = wid.y;
    let kvh = wid.z;
    let slot = me / LANES;
    let kg = slot / ROWS;
    let rl = slot % ROWS;
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

    // Every group runs the same trips (the plain entry's barriers); a group's tile past `hi`
    // is all masked.
    for (var k0 = lo; k0 < hi; k0 += BK * KEY_GROUPS) {
        let kb = k0 + kg * BK;
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
        let sc = row_scores(dots, me, slot, lane, kb, keys, valid, hi);
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

    let hr = t * p.n_heads + h;
    var st = merge_groups(Softmax(m, l, o0, o1), me);
    if p.n_splits > 1u {
        if valid && kg == 0u {
            let at = record_at(hr, split);
            put4(at + lane, st.o0);
            put4(at + 4u * LANES + lane, st.o1);
            if lane == 0u {
                put(at + HD, st.m);
                put(at + HD + 1u, st.l);
            }
        }
        // This workgroup's records before its arrival.
        storageBarrier();
        let counter = kvh * ((n_rows + ROWS - 1u) / ROWS) + tile;
        if me == 0u {
            last_split = atomicAdd(&splits[counter], 1u) == p.n_splits - 1u;
        }
        if !workgroupUniformLoad(&last_split) {
            return;
        }
        // The other workgroups' records after their arrivals.
        storageBarrier();
        if me == 0u {
            atomicStore(&splits[counter], 0u);
        }
        // Group kg merges splits kg, kg + KEY_GROUPS, .. four a trip (their loads together).
        st = EMPTY;
        for (var s = kg; s < p.n_splits; s += 4u * KEY_GROUPS) {
            let a = record(hr, s, lane);
            let b = record(hr, s + KEY_GROUPS, lane);
            let c = record(hr, s + 2u * KEY_GROUPS, lane);
            let d = record(hr, s + 3u * KEY_GROUPS, lane);
            st = merged(merged(merged(merged(st, a), b), c), d);
        }
        st = merge_groups(st, me);
    }
    if !valid || kg != 0u {
        return;
    }
    let scale = select(0.0, 1.0 / st.l, st.l > 0.0);
    let d0 = p.out_offset + hr * HD + 4u * lane;
    let d1 = d0 + HD / 2u;
    for (var i = 0u; i < 4u; i++) {
        out[d0 + i] = st.o0[i] * scale;
        out[d1 + i] = st.o1[i] * scale;
    }
}
