// The decode attention's query with head_norm_rope_kv folded in (one token, n_tokens = 1):
// every workgroup norms (NORM == 1: weights wq, wk) and rotates (NEOX pairing, the first
// n_rot dims, angle pos * freqs[j]) the q heads of its rows and its kv head's k head, with
// rope/rotate.wgsl's per-element arithmetic; the workgroups whose split holds the token's
// position `at` store that finished k head and the token's v head (unchanged) at row
// (kvh, at) of the caches through store_k / store_v (attention/kv_store_<dtype>.wgsl: what
// head_norm_rope_kv stores), then a storage barrier lets the key loop read them. Only that
// split reads position `at`, so no other workgroup waits for the store; the tiles of one kv
// head (GQA groups wider than a workgroup's rows) all store the same head, bit for bit the
// same values, which is benign. Positions >= max_len are dropped, as kv_append drops them.
// q and k are not written back. No fresh key: the loop reads the token's from the cache.
//
// The heads (ROWS q heads and the k head) go through workgroup memory: under NEOX with
// n_rot < HD a pair's dims lie in different lanes, and the norm's sum of squares is formed
// exactly as head_norm_rope.wgsl forms it (its 64 invocations' slots: slot s sums pairs s,
// s + 64, .. in order, then the same tree over the 64 slots), so the normed values match it.
// q of head h of token 0 at q_offset + h * HD, k's kv head at k_offset + kvh * HD, v's at
// v_offset + kvh * HD (all in binding qv or kv_src / v_src, which may be one buffer).

// Bindings and overrides: attention/rope_bindings.wgsl.
// head_norm_rope.wgsl's workgroup (its slots of the norm's sum) and pairs per invocation.
const SLOTS: u32 = 64u;
const SLOT_PAIRS: u32 = 4u;
// The workgroup's heads: its ROWS q heads, then the k head (index ROWS).
override N_HEADS: u32 = ROWS + 1u;
override HEAD_VALUES: u32 = N_HEADS * HD;
override HEAD_SLOTS: u32 = N_HEADS * SLOTS;

var<workgroup> heads: array<f32, HEAD_VALUES>;
var<workgroup> squares: array<f32, HEAD_SLOTS>;

// Raw value d of workgroup head hh (rows past the last read the last row's q, as the key
// loop's clamped rows do).
fn raw_value(hh: u32, d: u32, tile: u32, kvh: u32) -> f32 {
    if hh == ROWS {
        return k_src[p.k_offset + kvh * HD + d];
    }
    let rc = min(tile * ROWS + hh, p.group - 1u);
    return qv[p.q_offset + (kvh * p.group + rc) * HD + d];
}

// Dim d of workgroup head hh, rotated (the heads already normed).
fn rotated(hh: u32, d: u32, ps: f32) -> f32 {
    let b = hh * HD;
    if d >= p.n_rot {
        return heads[b + d];
    }
    let half = p.n_rot / 2u;
    var j = d / 2u;
    if NEOX == 1u {
        j = select(d, d - half, d >= half);
    }
    let e = rope_dims(j, p.n_rot);
    let y = rotate_pair(vec2<f32>(heads[b + e.x], heads[b + e.y]), ps * freqs[j]);
    return select(y.x, y.y, d == e.y);
}

var<private> q_lane: Query;

fn query_end(split: u32, kvh: u32, lane: u32, tid: u32) -> Query {
    return q_lane;
}

fn query_begin(t: u32, h: u32, split: u32, tile: u32, kvh: u32, lane: u32, tid: u32) {
    for (var i = tid; i < HEAD_VALUES; i += WG) {
        heads[i] = raw_value(i / HD, i % HD, tile, kvh);
    }
    workgroupBarrier();
    if NORM == 1u {
        for (var i = tid; i < HEAD_SLOTS; i += WG) {
            let b = (i / SLOTS) * HD;
            var ss = 0.0;
            for (var m = 0u; m < SLOT_PAIRS; m++) {
                let j = i % SLOTS + m * SLOTS;
                if j < HD / 2u {
                    let e = rope_dims(j, p.n_rot);
                    ss += square_pair(heads[b + e.x], heads[b + e.y]);
                }
            }
            squares[i] = ss;
        }
        workgroupBarrier();
        for (var s = SLOTS / 2u; s > 0u; s >>= 1u) {
            for (var i = tid; i < N_HEADS * s; i += WG) {
                let at = (i / s) * SLOTS + i % s;
                squares[at] += squares[at + s];
            }
            workgroupBarrier();
        }
        for (var i = tid; i < HEAD_VALUES; i += WG) {
            let hh = i / HD;
            let d = i % HD;
            let r = norm_scale(squares[hh * SLOTS], HD, p.eps);
            heads[i] = normed(heads[i], r, select(wq[d], wk[d], hh == ROWS));
        }
        workgroupBarrier();
    }
    let at = pos[p.pos_offset];
    let ps = f32(at);
    let rl = row_in_tile(tid);
    var q: Query;
    for (var i = 0u; i < 4u; i++) {
        q.lo[i] = rotated(rl, 4u * lane + i, ps);
        q.hi[i] = rotated(rl, HD / 2u + 4u * lane + i, ps);
    }
    if at < p.max_len && at / p.split_len == split {
        let dst = (kvh * p.max_len + at) * (HD / 2u);
        let src = p.v_offset + kvh * HD;
        for (var i = tid; i < HD / 2u; i += WG) {
            store_k(dst + i, vec2<f32>(rotated(ROWS, 2u * i, ps), rotated(ROWS, 2u * i + 1u, ps)));
            store_v(dst + i, vec2<f32>(v_src[src + 2u * i], v_src[src + 2u * i + 1u]));
        }
    }
    // The stores above before any invocation's cache loads in the key loop.
    storageBarrier();
    q_lane = q;
}
