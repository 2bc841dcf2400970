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
// partial dot products for 16 keys, the lanes of a row are summed through workgroup memory,
// then every lane of the row rescales and accumulates p * v for its dims. Key loops are
// unrolled by hand 4 keys at a time, so 16 cache loads per lane are in flight together.
// partial = 0: out[out_offset + (t * n_heads + h) * HD + d] = o / l (one split).
// partial = 1: record (o[HD], m, l) at ((t * n_heads + h) * n_splits + split) * (HD + 2), for
// attention/combine.wgsl. Cache access (`load_k`, `load_v`, pair index) comes from
// kv_load_<dtype>.wgsl.
//
// The query comes through `query` of the included hook file, which also binds the caches:
// attention/q_plain.wgsl (q read as it is; caches read-only), or attention/q_rope.wgsl (one
// decode token: the per-head norm and RoPE of q and k done here, and the new k and v heads
// stored into the caches before the key loop: head_norm_rope_kv folded in; its parameters
// are the fields after `softcap`). Params, the shared bindings and `row_keys`:
// attention/params.wgsl.

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

var<workgroup> part: array<array<f32, 16>, WG>;
var<workgroup> scores: array<array<f32, 16>, ROWS>;
var<workgroup> range_lo: u32;
var<workgroup> range_hi: u32;

// This lane's 4 pairs of cache row `row` (pair index base `b` = row * HD/2 + 2 * lane).
fn k_dot(b: u32, q0: vec4<f32>, q1: vec4<f32>) -> f32 {
    let a = vec4<f32>(load_k(b), load_k(b + 1u));
    let c = vec4<f32>(load_k(b + HD / 4u), load_k(b + HD / 4u + 1u));
    return dot(a, q0) + dot(c, q1);
}

fn v_lo(b: u32) -> vec4<f32> {
    return vec4<f32>(load_v(b), load_v(b + 1u));
}

fn v_hi(b: u32) -> vec4<f32> {
    return vec4<f32>(load_v(b + HD / 4u), load_v(b + HD / 4u + 1u));
}

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(local_invocation_index) tid: u32,
) {
    let split = wid.x;
    let tile = wid.y;
    let kvh = wid.z;
    let rl = tid / LANES;
    let lane = tid % LANES;
    let n_rows = p.n_tokens * p.group;
    let row = tile * ROWS + rl;
    let valid = row < n_rows;
    let rc = min(row, n_rows - 1u);
    let t = rc / p.group;
    let h = kvh * p.group + rc % p.group;
    let keys = row_keys(rc);

    // Called by every invocation in uniform control flow (the rotating hook has barriers),
    // before the key range: q's loads do not depend on the positions, so they travel with the
    // position loads below instead of after them (one round trip to memory fewer).
    let q = query(t, h, split, tile, kvh, lane, tid);
    let q0 = q.lo;
    let q1 = q.hi;

    // The keys any row of this tile needs, within this split.
    if tid == 0u {
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

    var o0 = vec4<f32>(0.0);
    var o1 = vec4<f32>(0.0);
    var m = NONE;
    var l = 0.0;
    let pairs = HD / 2u;
    let last = p.max_len - 1u;
    // Pair index of (kv head, position j) for this lane; j clamped into the cache (keys past
    // `hi` are computed and then masked).
    let lane_pair = 2u * lane;
    let row0 = kvh * p.max_len;

    for (var kb = lo; kb < hi; kb += BK) {
        for (var k = 0u; k < BK; k += 4u) {
            let j = kb + k;
            let b0 = (row0 + min(j, last)) * pairs + lane_pair;
            let b1 = (row0 + min(j + 1u, last)) * pairs + lane_pair;
            let b2 = (row0 + min(j + 2u, last)) * pairs + lane_pair;
            let b3 = (row0 + min(j + 3u, last)) * pairs + lane_pair;
            part[tid][k] = k_dot(b0, q0, q1);
            part[tid][k + 1u] = k_dot(b1, q0, q1);
            part[tid][k + 2u] = k_dot(b2, q0, q1);
            part[tid][k + 3u] = k_dot(b3, q0, q1);
        }
        workgroupBarrier();
        for (var kk = lane; kk < BK; kk += LANES) {
            var s = 0.0;
            for (var j = 0u; j < LANES; j++) {
                s += part[rl * LANES + j][kk];
            }
            s *= p.scale;
            if p.softcap > 0.0 {
                s = p.softcap * tanh(s / p.softcap);
            }
            let key = kb + kk;
            if !valid || key < keys.x || key >= keys.y || key >= hi {
                s = NONE;
            }
            scores[rl][kk] = s;
        }
        workgroupBarrier();
        var mt = NONE;
        for (var k = 0u; k < BK; k++) {
            mt = max(mt, scores[rl][k]);
        }
        let mn = max(m, mt);
        let c = exp(m - mn);
        l *= c;
        o0 *= c;
        o1 *= c;
        m = mn;
        for (var k = 0u; k < BK; k += 4u) {
            let j = kb + k;
            // Masked keys weigh 0 (their clamped rows are finite).
            let sv = vec4<f32>(scores[rl][k], scores[rl][k + 1u], scores[rl][k + 2u], scores[rl][k + 3u]);
            let w = select(exp(sv - m), vec4<f32>(0.0), sv <= vec4<f32>(NONE));
            l += w.x + w.y + w.z + w.w;
            let b0 = (row0 + min(j, last)) * pairs + lane_pair;
            let b1 = (row0 + min(j + 1u, last)) * pairs + lane_pair;
            let b2 = (row0 + min(j + 2u, last)) * pairs + lane_pair;
            let b3 = (row0 + min(j + 3u, last)) * pairs + lane_pair;
            o0 += w.x * v_lo(b0) + w.y * v_lo(b1) + w.z * v_lo(b2) + w.w * v_lo(b3);
            o1 += w.x * v_hi(b0) + w.y * v_hi(b1) + w.z * v_hi(b2) + w.w * v_hi(b3);
        }
        workgroupBarrier();
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
