// Per-head RMS norm (NORM == 1: x / sqrt(mean(x^2) + eps) * weight, weight of head_dim, as
// norm/rms_norm.wgsl) then RoPE exactly as rope/rope.wgsl (NEOX pairing, first n_rot dims,
// pair i turned by pos * freqs[i]), in place, over up to two tensors in one dispatch: q
// (bindings xq, wq) and k (xk, wk; k_heads = 0 when there is none). Each is
// [n_tokens, heads, head_dim]: head h of token t starts at offset + t * stride + h * head_dim
// (a stride wider than heads * head_dim reads q or k out of fused qkv rows). Token t is at
// position pos[pos_offset + t].
//
// One workgroup of WG per (tensor, token, head): workgroups 0 .. n_tokens * q_heads do q, the
// rest do k. Invocation tid holds pairs j = tid + m * WG (m < PAIRS, so head_dim <= 2 * PAIRS
// * WG = 512), loaded together with their gains, frequencies and the token's position (all in
// flight before the norm's reduction) and kept in registers through the norm's sum and the
// rotation. Pair j < n_rot / 2 is the rotated pair (j, j + n_rot/2) (NEOX) or
// (2j, 2j + 1); pairs past n_rot / 2 are the unrotated dims (2j, 2j + 1), only normed.
//
// A k head also goes through `keep` (each finished pair) and `cache_head` (once the head is
// done) from the included file: rope/kv_none.wgsl (nothing: the plain kernel) or
// rope/kv_cache.wgsl (the head into a KV cache, with the same token's v head: kv_append
// folded in, with the max_len, v_offset and v_stride parameters). The per-element norm and
// rotation are rope/rotate.wgsl's, shared with the decode attention that does this op's work
// itself (attention/q_rope.wgsl).

struct Params {
    head_dim: u32,
    n_rot: u32,
    n_tokens: u32,
    pos_offset: u32,
    q_heads: u32,
    q_offset: u32,
    q_stride: u32,
    k_heads: u32,
    k_offset: u32,
    k_stride: u32,
    eps: f32,
    max_len: u32,
    v_offset: u32,
    v_stride: u32,
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> xq: array<f32>;
@group(0) @binding(2) var<storage, read_write> xk: array<f32>;
@group(0) @binding(3) var<storage, read> pos: array<u32>;
@group(0) @binding(4) var<storage, read> freqs: array<f32>;
@group(0) @binding(5) var<storage, read> wq: array<f32>;
@group(0) @binding(6) var<storage, read> wk: array<f32>;

override WG: u32 = 64u;
override NEOX: u32 = 1u;
override NORM: u32 = 1u;
// Pairs per invocation.
const PAIRS: u32 = 4u;

// The branch on is_k is uniform: one workgroup is all q or all k.
fn load(is_k: bool, i: u32) -> f32 {
    if is_k {
        return xk[i];
    }
    return xq[i];
}

fn store(is_k: bool, i: u32, v: f32) {
    if is_k {
        xk[i] = v;
    } else {
        xq[i] = v;
    }
}

fn gain(is_k: bool, i: u32) -> f32 {
    if is_k {
        return wk[i];
    }
    return wq[i];
}

// The dims of pair j (row-relative).
fn pair(j: u32) -> vec2<u32> {
    return rope_dims(j, p.n_rot);
}

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) tid: u32,
) {
    let g = wid.y * nwg.x + wid.x;
    let nq = p.n_tokens * p.q_heads;
    if g >= nq + p.n_tokens * p.k_heads {
        return;
    }
    let is_k = g >= nq;
    var row = g;
    var heads = p.q_heads;
    var base = p.q_offset;
    var stride = p.q_stride;
    if is_k {
        row = g - nq;
        heads = p.k_heads;
        base = p.k_offset;
        stride = p.k_stride;
    }
    let t = row / heads;
    base += t * stride + (row % heads) * p.head_dim;
    let n_pairs = p.head_dim / 2u;
    let last = p.head_dim - 1u;

    // Every load up front (values, gains, position, frequencies), so they are in flight
    // together: each round of dependent loads costs a global latency, and the norm's
    // reduction (barriers) would otherwise sit between the values and the rest.
    let ps = f32(pos[p.pos_offset + t]);
    let half = p.n_rot / 2u;
    var x0: array<f32, PAIRS>;
    var x1: array<f32, PAIRS>;
    var g0: array<f32, PAIRS>;
    var g1: array<f32, PAIRS>;
    var fr: array<f32, PAIRS>;
    for (var m = 0u; m < PAIRS; m++) {
        let j = tid + m * WG;
        let d = min(pair(j), vec2<u32>(last));
        x0[m] = select(0.0, load(is_k, base + d.x), j < n_pairs);
        x1[m] = select(0.0, load(is_k, base + d.y), j < n_pairs);
        if NORM == 1u {
            g0[m] = gain(is_k, d.x);
            g1[m] = gain(is_k, d.y);
        }
        fr[m] = freqs[min(j, max(half, 1u) - 1u)];
    }
    if NORM == 1u {
        var ss = 0.0;
        for (var m = 0u; m < PAIRS; m++) {
            ss += square_pair(x0[m], x1[m]);
        }
        let r = norm_scale(workgroup_sum(ss, tid), p.head_dim, p.eps);
        for (var m = 0u; m < PAIRS; m++) {
            x0[m] = normed(x0[m], r, g0[m]);
            x1[m] = normed(x1[m], r, g1[m]);
        }
    }
    for (var m = 0u; m < PAIRS; m++) {
        let j = tid + m * WG;
        // Not a `break`: cache_head's barrier below must stay in uniform control flow.
        if j < n_pairs {
            let d = pair(j);
            var y0 = x0[m];
            var y1 = x1[m];
            if j < half {
                let y = rotate_pair(vec2<f32>(x0[m], x1[m]), ps * fr[m]);
                y0 = y.x;
                y1 = y.y;
            }
            store(is_k, base + d.x, y0);
            store(is_k, base + d.y, y1);
            if is_k {
                keep(d, vec2<f32>(y0, y1));
            }
        }
    }
    if is_k {
        cache_head(t, row % heads, tid);
    }
}
