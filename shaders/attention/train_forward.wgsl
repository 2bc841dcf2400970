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
    let tile = pair_tile(group_index(wid, nwg));
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
    var acc: array<vec4<f32>, 8>;
    for (var j0 = keys.x; j0 < keys.y; j0 += BK) {
        let raw = qk_dots(g, e0, j0, tid);
        var s = vec4<f32>(LOW);
        for (var u = 0u; u < 4u; u++) {
            if sees(me, j0 + c + 8u * u) {
                s[u] = score(p.scale * raw[u]).s;
            }
            pt[r * RP + c + 8u * u] = s[u];
        }
        workgroupBarrier();
        let m_old = m_s[r];
        var m_new = m_old;
        for (var x = 0u; x < BK; x++) {
            m_new = max(m_new, pt[r * RP + x]);
        }
        workgroupBarrier();
        for (var u = 0u; u < 4u; u++) {
            var pr = 0.0;
            if sees(me, j0 + c + 8u * u) {
                pr = exp(s[u] - m_new);
            }
            pt[r * RP + c + 8u * u] = pr;
        }
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
        let r0 = 4u * w;
        let alpha = vec4<f32>(alpha_s[r0], alpha_s[r0 + 1u], alpha_s[r0 + 2u], alpha_s[r0 + 3u]);
        for (var u = 0u; u < 8u; u++) {
            acc[u] *= alpha;
        }
        let count = min(BK, hi + 1u - j0);
        for (var x = 0u; x < count; x++) {
            let pr = vec4<f32>(
                pt[r0 * RP + x],
                pt[(r0 + 1u) * RP + x],
                pt[(r0 + 2u) * RP + x],
                pt[(r0 + 3u) * RP + x],
            );
            let v_row = p.v_offset + ((j0 + x) * p.n_kv + g) * p.dv;
            for (var u = 0u; u < 8u; u++) {
                let col = col0 + lane + 32u * u;
                if col < p.dv {
                    acc[u] = fma(pr, vec4<f32>(v[v_row + col]), acc[u]);
                }
            }
        }
        workgroupBarrier();
    }
    let rows = p.n * p.n_head;
    let split_out = p.key_splits > 1u;
    let o_at = p.o_offset + split * rows * p.dv;
    for (var u = 0u; u < 8u; u++) {
        let col = col0 + lane + 32u * u;
        for (var ru = 0u; ru < 4u; ru++) {
            let e = e0 + 4u * w + ru;
            if e < pairs && col < p.dv {
                var x = acc[u][ru];
                if !split_out {
                    x /= l_s[4u * w + ru];
                }
                o[o_at + pair_row(g, e) * p.dv + col] = x;
            }
        }
    }
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
