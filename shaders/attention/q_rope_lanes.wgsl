// The decode attention's query with head_norm_rope_kv folded in, in registers (one token,
// n_tokens = 1): the hook of attention/q_rope.wgsl's contract (the same bindings and
// parameters, the same per-element arithmetic of rope/rotate.wgsl), for the heads whose every
// rotation pair lies within one lane: the lane's 8 dims (4 lane .. 4 lane + 3 and HD/2 + 4
// lane .. + 3, the layout of the key loop) hold whole pairs when NEOX pairs dims (j, j + HD/2)
// over the whole head (n_rot = HD) or when pairs are (2j, 2j + 1) (normal, any n_rot).
// attention/q_rope.wgsl takes the other heads (NEOX over part of the head) through workgroup
// memory and barriers.
//
// query_begin: every lane loads its 8 dims of its row's q head, of the k head and of the v
// head, their gains and its pairs' frequencies, all in flight together with the position;
// with norms (NORM == 1) it writes its sums of squares (q's, k's) to its workgroup slot.
// query_end, after the key range's barrier (which publishes the slots): each lane adds its
// row's LANES slots in lane order, norms, rotates, and holds the token's finished k and its v
// as the cache words (`fresh_k`, `fresh_v` at `fresh_at`), which the key loop takes for that
// position instead of the cache's: nothing waits for a store. Row 0's lanes of the
// workgroups whose split holds the position store those words at row (kvh, at) of the caches
// for later steps (kv_store_<dtype>.wgsl: what head_norm_rope_kv stores; tiles of one kv head
// store the same words). Positions >= max_len are dropped. The norm's sums run in another
// order than head_norm_rope's tree, so normed heads agree with that kernel's to rounding,
// not bit for bit (without norms they are equal). q and k are not written back.

// Bindings and overrides: attention/rope_bindings.wgsl.

// Each invocation's sums of squares: (its 8 q dims', its 8 k dims').
var<workgroup> squares: array<vec2<f32>, WG>;

// 4 consecutive values of q, k, v or a gain from index i.
fn q4(i: u32) -> vec4<f32> {
    return vec4<f32>(qv[i], qv[i + 1u], qv[i + 2u], qv[i + 3u]);
}

fn k4(i: u32) -> vec4<f32> {
    return vec4<f32>(k_src[i], k_src[i + 1u], k_src[i + 2u], k_src[i + 3u]);
}

fn v4(i: u32) -> vec4<f32> {
    return vec4<f32>(v_src[i], v_src[i + 1u], v_src[i + 2u], v_src[i + 3u]);
}

fn wq4(i: u32) -> vec4<f32> {
    return vec4<f32>(wq[i], wq[i + 1u], wq[i + 2u], wq[i + 3u]);
}

fn wk4(i: u32) -> vec4<f32> {
    return vec4<f32>(wk[i], wk[i + 1u], wk[i + 2u], wk[i + 3u]);
}

// Where a lane's two vec4s of a head starting at `base` begin: 4 lane and HD/2 + 4 lane.
fn lane_at(base: u32, lane: u32) -> vec2<u32> {
    let a = base + 4u * lane;
    return vec2<u32>(a, a + HD / 2u);
}

// The lane's share of its head's sum of squares: its 4 pairs' square_pair, in pair order.
fn lane_squares(x: Query) -> f32 {
    if NEOX == 1u {
        return square_pair(x.lo.x, x.hi.x) + square_pair(x.lo.y, x.hi.y) + square_pair(x.lo.z, x.hi.z) + square_pair(x.lo.w, x.hi.w);
    }
    return square_pair(x.lo.x, x.lo.y) + square_pair(x.lo.z, x.lo.w) + square_pair(x.hi.x, x.hi.y) + square_pair(x.hi.z, x.hi.w);
}

fn normed4(x: vec4<f32>, r: f32, g: vec4<f32>) -> vec4<f32> {
    return vec4<f32>(normed(x.x, r, g.x), normed(x.y, r, g.y), normed(x.z, r, g.z), normed(x.w, r, g.w));
}

fn normed_lane(x: Query, r: f32, g: Query) -> Query {
    return Query(normed4(x.lo, r, g.lo), normed4(x.hi, r, g.hi));
}

// The rotation angles of the lane's 4 pairs, in pair order (0 for unrotated pairs, which
// `rotated_lane` leaves as they are). NEOX (n_rot = HD): pair i is (lo[i], hi[i]), pair
// index 4 lane + i. Normal: pairs (lo.xy), (lo.zw), (hi.xy), (hi.zw), pair indices 2 lane,
// 2 lane + 1, HD/4 + 2 lane, HD/4 + 2 lane + 1; those at or past n_rot / 2 unrotated.
fn lane_pairs(lane: u32) -> vec4<u32> {
    if NEOX == 1u {
        return vec4<u32>(4u * lane) + vec4<u32>(0u, 1u, 2u, 3u);
    }
    return vec4<u32>(2u * lane, 2u * lane + 1u, HD / 4u + 2u * lane, HD / 4u + 2u * lane + 1u);
}

fn lane_angles(lane: u32, ps: f32) -> vec4<f32> {
    let j = lane_pairs(lane);
    let half = p.n_rot / 2u;
    let f = min(j, vec4<u32>(max(half, 1u) - 1u));
    return vec4<f32>(ps * freqs[f.x], ps * freqs[f.y], ps * freqs[f.z], ps * freqs[f.w]);
}

fn turn(x: vec2<f32>, a: f32, rotate: bool) -> vec2<f32> {
    if rotate {
        return rotate_pair(x, a);
    }
    return x;
}

fn rotated_lane(x: Query, a: vec4<f32>, lane: u32) -> Query {
    let r = lane_pairs(lane) < vec4<u32>(p.n_rot / 2u);
    if NEOX == 1u {
        let p0 = turn(vec2<f32>(x.lo.x, x.hi.x), a.x, r.x);
        let p1 = turn(vec2<f32>(x.lo.y, x.hi.y), a.y, r.y);
        let p2 = turn(vec2<f32>(x.lo.z, x.hi.z), a.z, r.z);
        let p3 = turn(vec2<f32>(x.lo.w, x.hi.w), a.w, r.w);
        return Query(vec4<f32>(p0.x, p1.x, p2.x, p3.x), vec4<f32>(p0.y, p1.y, p2.y, p3.y));
    }
    let p0 = turn(x.lo.xy, a.x, r.x);
    let p1 = turn(x.lo.zw, a.y, r.y);
    let p2 = turn(x.hi.xy, a.z, r.z);
    let p3 = turn(x.hi.zw, a.w, r.w);
    return Query(vec4<f32>(p0, p1), vec4<f32>(p2, p3));
}

// What query_begin loaded for query_end.
var<private> q_raw: Query;
var<private> k_raw: Query;
var<private> v_raw: Query;
var<private> q_gain: Query;
var<private> k_gain: Query;
var<private> angles: vec4<f32>;
var<private> at: u32;

fn query_begin(t: u32, h: u32, split: u32, tile: u32, kvh: u32, lane: u32, tid: u32) {
    at = pos[p.pos_offset];
    // Rows past the last read the last row's q, as the key loop's clamped rows do.
    let rc = min(tile * ROWS + row_in_tile(tid), p.group - 1u);
    let iq = lane_at(p.q_offset + (kvh * p.group + rc) * HD, lane);
    let ik = lane_at(p.k_offset + kvh * HD, lane);
    let iv = lane_at(p.v_offset + kvh * HD, lane);
    q_raw = Query(q4(iq.x), q4(iq.y));
    k_raw = Query(k4(ik.x), k4(ik.y));
    v_raw = Query(v4(iv.x), v4(iv.y));
    angles = lane_angles(lane, f32(at));
    if NORM == 1u {
        let ig = lane_at(0u, lane);
        q_gain = Query(wq4(ig.x), wq4(ig.y));
        k_gain = Query(wk4(ig.x), wk4(ig.y));
        squares[tid] = vec2<f32>(lane_squares(q_raw), lane_squares(k_raw));
    }
}

fn query_end(split: u32, kvh: u32, lane: u32, tid: u32) -> Query {
    var q = q_raw;
    var k = k_raw;
    if NORM == 1u {
        let row = tid - lane;
        var sq = 0.0;
        var sk = 0.0;
        for (var j = 0u; j < LANES; j++) {
            let s = squares[row + j];
            sq += s.x;
            sk += s.y;
        }
        q = normed_lane(q, norm_scale(sq, HD, p.eps), q_gain);
        k = normed_lane(k, norm_scale(sk, HD, p.eps), k_gain);
    }
    q = rotated_lane(q, angles, lane);
    k = rotated_lane(k, angles, lane);
    if at < p.max_len {
        fresh_at = at;
        fresh_k = words(k);
        fresh_v = words(v_raw);
        if tid < LANES && at / p.split_len == split {
            let a = (kvh * p.max_len + at) * (HD / 2u) + 2u * lane;
            let b = a + HD / 4u;
            kc[a] = fresh_k.lo0;
            kc[a + 1u] = fresh_k.lo1;
            kc[b] = fresh_k.hi0;
            kc[b + 1u] = fresh_k.hi1;
            vc[a] = fresh_v.lo0;
            vc[a + 1u] = fresh_v.lo1;
            vc[b] = fresh_v.hi0;
            vc[b + 1u] = fresh_v.hi1;
        }
    }
    return q;
}

// A lane's 8 values as the cache words that hold them (the key loop's quad layout).
fn words(x: Query) -> KvQuad {
    return KvQuad(kv_word(x.lo.xy), kv_word(x.lo.zw), kv_word(x.hi.xy), kv_word(x.hi.zw));
}
