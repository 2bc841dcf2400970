// The training attention's backward, dq (with attention/train_params.wgsl,
// attention/train_tiles.wgsl and attention/train_backward_tiles.wgsl): one workgroup per (tile
// of BQ pairs, kv head, COLS columns) walks the keys its rows see in tiles of BK, as the
// forward (attention/train_forward.wgsl) does, recomputing each weight from the forward's
// log-sum-exp: p_j = exp(s_j - lse_i), dp_j = do_i . v_j, ds_j = p_j (dp_j - D_i) cap'_j with
// D_i = do_i . o_i, and dq_i = scale sum_j ds_j k_j. The workgroup owns its rows of dq, so no
// two workgroups write one element (WGSL has no float atomics). With p.key_splits > 1 the grid's
// z also walks splits of each pair tile's keys, split s writing its partial sums to slice s of
// dq (a split sum adds them up): short blocks have few pair tiles, and a sequence's last tiles
// see all its keys.

@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> k: array<f32>;
@group(0) @binding(3) var<storage, read> v: array<f32>;
@group(0) @binding(4) var<storage, read> o: array<f32>;
@group(0) @binding(5) var<storage, read> lse: array<f32>;
@group(0) @binding(6) var<storage, read> dout: array<f32>;
@group(0) @binding(7) var<storage, read> start: array<u32>;
@group(0) @binding(8) var<storage, read_write> dq: array<f32>;

// The tile's ds.
var<workgroup> pt: array<f32, 1056>; // BQ * RP
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
    var li = 0.0;
    if me.valid {
        li = lse[p.lse_offset + pair_row(g, e0 + r)];
    }
    if tid == 0u {
        let i0 = e0 / group_size();
        lo_shared = first_key(i0, start[p.start_offset + i0]);
    }
    // Uniform for the loop's barriers: start[] is a storage read.
    let lo = workgroupUniformLoad(&lo_shared);
    let hi = (min(e0 + BQ, pairs) - 1u) / group_size();
    // This split's share of the key tiles.
    let keys = split_share(lo, hi + 1u, BK, p.key_splits, split);
    var acc: array<vec4<f32>, 8>;
    for (var j0 = keys.x; j0 < keys.y; j0 += BK) {
        let raw = qk_dots(g, e0, j0, tid);
        let dp = dov_dots(g, e0, j0, tid);
        workgroupBarrier();
        let delta = pair_delta(r);
        for (var u = 0u; u < 4u; u++) {
            var ds = 0.0;
            if sees(me, j0 + c + 8u * u) {
                let sc = score(p.scale * raw[u]);
                ds = exp(sc.s - li) * (dp[u] - delta) * sc.grad;
            }
            pt[r * RP + c + 8u * u] = ds;
        }
        workgroupBarrier();
        let r0 = 4u * w;
        let count = min(BK, hi + 1u - j0);
        for (var x = 0u; x < count; x++) {
            let ds = vec4<f32>(
                pt[r0 * RP + x],
                pt[(r0 + 1u) * RP + x],
                pt[(r0 + 2u) * RP + x],
                pt[(r0 + 3u) * RP + x],
            );
            let k_row = p.k_offset + ((j0 + x) * p.n_kv + g) * p.dk;
            for (var u = 0u; u < 8u; u++) {
                let col = col0 + lane + 32u * u;
                if col < p.dk {
                    acc[u] = fma(ds, vec4<f32>(k[k_row + col]), acc[u]);
                }
            }
        }
        workgroupBarrier();
    }
    let dq_at = p.dq_offset + split * p.n * p.n_head * p.dk;
    for (var u = 0u; u < 8u; u++) {
        let col = col0 + lane + 32u * u;
        for (var ru = 0u; ru < 4u; ru++) {
            let e = e0 + 4u * w + ru;
            if e < pairs && col < p.dk {
                dq[dq_at + pair_row(g, e) * p.dk + col] = p.scale * acc[u][ru];
            }
        }
    }
}
