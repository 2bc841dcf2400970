// Causal attention over a block of rows without a KV cache, for training (with
// attention/train_params.wgsl and attention/train_tiles.wgsl): o = softmax(cap(scale q k^T)) v
// per query head, and the log-sum-exp of each (row, head)'s scores for the backward. One
// workgroup per (tile of BQ pairs, kv head, COLS columns) walks the keys its rows see in tiles
// of BK with an online softmax (per pair a running max m and sum l; the accumulators rescaled
// by exp(m_old - m_new) when the max grows), so nothing of size n^2 exists. With
// p.key_splits > 1 the grid's z also walks splits of each pair tile's keys: split s leaves its
// unnormalised o in slice s of `o` and its max and sum in slices s and key_splits + s of `lse`
// for attention/train_combine.wgsl (short blocks have few pair tiles, and a sequence's last
// tiles see all its keys).

@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> k: array<f32>;
@group(0) @binding(3) var<storage, read> v: array<f32>;
@group(0) @binding(4) var<storage, read> start: array<u32>;
@group(0) @binding(5) var<storage, read_write> o: array<f32>;
@group(0) @binding(6) var<storage, read_write> lse: array<f32>;

// The tile's scores, then its weights exp(s - m).
var<workgroup> pt: array<f32, 1056>; // BQ * RP
var<workgroup> m_s: array<f32, 32>; // BQ
var<workgroup> l_s: array<f32, 32>;
var<workgroup> alpha_s: array<f32, 32>;
var<workgroup> lo_shared: u32;

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) tid: u32,
) {
    let pairs = pair_count();
    let tile = pair_tile(group_index(wid, nwg), BQ);
    if !tile.valid {
        return;
    }
    let g = tile.g;
    let e0 = tile.e0;
    let col0 = z_slice(wid.z).col0;
    let split = z_slice(wid.z).split;
    let r = tid / 8u;
    let c = tid % 8u;
    let w = tid / 32u;
    let lane = tid % 32u;
    let me = sight(e0 + r);
    if tid < BQ {
        m_s[tid] = LOW;
        l_s[tid] = 0.0;
    }
    if tid == 0u {
        let i0 = e0 / group_size();
        lo_shared = first_key(i0, start[p.start_offset + i0]);
    }
    // Uniform for the loop's barriers (start[] is a storage read); also the barrier after m_s
    // and l_s.
    let lo = workgroupUniformLoad(&lo_shared);
    let hi = (min(e0 + BQ, pairs) - 1u) / group_size();
    // This split's share of the key tiles.
    let keys = split_share(lo, hi + 1u, BK, p.key_splits, split);
    // o's accumulators in named registers (an array indexed in a loop would live in memory):
    // a_u holds rows 4 w .. 4 w + 3 (x .. w) of column col0 + lane + 32 u.
    var a0 = vec4<f32>(0.0);
    var a1 = vec4<f32>(0.0);
    var a2 = vec4<f32>(0.0);
    var a3 = vec4<f32>(0.0);
    var a4 = vec4<f32>(0.0);
    var a5 = vec4<f32>(0.0);
    var a6 = vec4<f32>(0.0);
    var a7 = vec4<f32>(0.0);
    let cl = col0 + lane;
    let last = p.dv - 1u;
    let r0 = 4u * w;
    for (var j0 = keys.x; j0 < keys.y; j0 += BK) {
        // m_s[r] as the previous tile left it (its write came before qk_dots' barriers).
        let m_old = m_s[r];
        let raw = qk_dots(g, e0, j0, tid);
        let vis = sees4(me, j0 + c);
        let s = select(vec4<f32>(LOW), score4(p.scale * raw).s, vis);
        let at = r * RP + c;
        pt[at] = s.x;
        pt[at + 8u] = s.y;
        pt[at + 16u] = s.z;
        pt[at + 24u] = s.w;
        workgroupBarrier();
        var m_new = m_old;
        for (var x = 0u; x < BK; x++) {
            m_new = max(m_new, pt[r * RP + x]);
        }
        workgroupBarrier();
        let pr = select(vec4<f32>(0.0), exp(s - m_new), vis);
        pt[at] = pr.x;
        pt[at + 8u] = pr.y;
        pt[at + 16u] = pr.z;
        pt[at + 24u] = pr.w;
        if c == 0u {
            m_s[r] = m_new;
            alpha_s[r] = exp(m_old - m_new);
        }
        workgroupBarrier();
        if c == 0u {
            var sum = 0.0;
            for (var x = 0u; x < BK; x++) {
                sum += pt[r * RP + x];
            }
            l_s[r] = l_s[r] * alpha_s[r] + sum;
        }
        let alpha = vec4<f32>(alpha_s[r0], alpha_s[r0 + 1u], alpha_s[r0 + 2u], alpha_s[r0 + 3u]);
        a0 *= alpha;
        a1 *= alpha;
        a2 *= alpha;
        a3 *= alpha;
        a4 *= alpha;
        a5 *= alpha;
        a6 *= alpha;
        a7 *= alpha;
        // Columns past dv are clamped (read, never stored); slots wholly past dv skipped.
        let count = min(BK, hi + 1u - j0);
        for (var x = 0u; x < count; x++) {
            let wt = vec4<f32>(
                pt[r0 * RP + x],
                pt[(r0 + 1u) * RP + x],
                pt[(r0 + 2u) * RP + x],
                pt[(r0 + 3u) * RP + x],
            );
            let row = p.v_offset + ((j0 + x) * p.n_kv + g) * p.dv;
            a0 = fma(wt, vec4<f32>(v[row + min(cl, last)]), a0);
            a1 = fma(wt, vec4<f32>(v[row + min(cl + 32u, last)]), a1);
            if p.dv > 64u {
                a2 = fma(wt, vec4<f32>(v[row + min(cl + 64u, last)]), a2);
                a3 = fma(wt, vec4<f32>(v[row + min(cl + 96u, last)]), a3);
            }
            if p.dv > 128u {
                a4 = fma(wt, vec4<f32>(v[row + min(cl + 128u, last)]), a4);
                a5 = fma(wt, vec4<f32>(v[row + min(cl + 160u, last)]), a5);
                a6 = fma(wt, vec4<f32>(v[row + min(cl + 192u, last)]), a6);
                a7 = fma(wt, vec4<f32>(v[row + min(cl + 224u, last)]), a7);
            }
        }
        workgroupBarrier();
    }
    let rows = p.n * p.n_head;
    let split_out = p.key_splits > 1u;
    // Split, the unnormalised sums; whole, divided by each row's l.
    var l = vec4<f32>(1.0);
    if !split_out {
        l = vec4<f32>(l_s[r0], l_s[r0 + 1u], l_s[r0 + 2u], l_s[r0 + 3u]);
    }
    let o_at = p.o_offset + split * rows * p.dv;
    put_o(a0 / l, cl, g, e0 + r0, o_at);
    put_o(a1 / l, cl + 32u, g, e0 + r0, o_at);
    put_o(a2 / l, cl + 64u, g, e0 + r0, o_at);
    put_o(a3 / l, cl + 96u, g, e0 + r0, o_at);
    put_o(a4 / l, cl + 128u, g, e0 + r0, o_at);
    put_o(a5 / l, cl + 160u, g, e0 + r0, o_at);
    put_o(a6 / l, cl + 192u, g, e0 + r0, o_at);
    put_o(a7 / l, cl + 224u, g, e0 + r0, o_at);
    if col0 == 0u && c == 0u && me.valid {
        let row = pair_row(g, e0 + r);
        if split_out {
            lse[p.lse_offset + split * rows + row] = m_s[r];
            lse[p.lse_offset + (p.key_splits + split) * rows + row] = l_s[r];
        } else {
            lse[p.lse_offset + row] = m_s[r] + log(l_s[r]);
        }
    }
}

// Column `col` of pairs e, e + 1, e + 2, e + 3 (of kv head g) into o from `o_at`, those inside.
fn put_o(a: vec4<f32>, col: u32, g: u32, e: u32, o_at: u32) {
    if col >= p.dv {
        return;
    }
    let pairs = pair_count();
    if e < pairs {
        o[o_at + pair_row(g, e) * p.dv + col] = a.x;
    }
    if e + 1u < pairs {
        o[o_at + pair_row(g, e + 1u) * p.dv + col] = a.y;
    }
    if e + 2u < pairs {
        o[o_at + pair_row(g, e + 2u) * p.dv + col] = a.z;
    }
    if e + 3u < pairs {
        o[o_at + pair_row(g, e + 3u) * p.dv + col] = a.w;
    }
}
