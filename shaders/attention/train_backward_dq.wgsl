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
    // dq's accumulators in named registers, as the forward's o.
    var a0 = vec4<f32>(0.0);
    var a1 = vec4<f32>(0.0);
    var a2 = vec4<f32>(0.0);
    var a3 = vec4<f32>(0.0);
    var a4 = vec4<f32>(0.0);
    var a5 = vec4<f32>(0.0);
    var a6 = vec4<f32>(0.0);
    var a7 = vec4<f32>(0.0);
    let cl = col0 + lane;
    let last = p.dk - 1u;
    let r0 = 4u * w;
    for (var j0 = keys.x; j0 < keys.y; j0 += BK) {
        let raw = qk_dots(g, e0, j0, tid);
        let dp = dov_dots(g, e0, j0, tid);
        workgroupBarrier();
        let delta = pair_delta(r);
        let sc = score4(p.scale * raw);
        let ds = select(vec4<f32>(0.0), exp(sc.s - li) * (dp - delta) * sc.grad, sees4(me, j0 + c));
        let at = r * RP + c;
        pt[at] = ds.x;
        pt[at + 8u] = ds.y;
        pt[at + 16u] = ds.z;
        pt[at + 24u] = ds.w;
        workgroupBarrier();
        // Columns past dk are clamped (read, never stored); slots wholly past dk skipped.
        let count = min(BK, hi + 1u - j0);
        for (var x = 0u; x < count; x++) {
            let wt = vec4<f32>(
                pt[r0 * RP + x],
                pt[(r0 + 1u) * RP + x],
                pt[(r0 + 2u) * RP + x],
                pt[(r0 + 3u) * RP + x],
            );
            let row = p.k_offset + ((j0 + x) * p.n_kv + g) * p.dk;
            a0 = fma(wt, vec4<f32>(k[row + min(cl, last)]), a0);
            a1 = fma(wt, vec4<f32>(k[row + min(cl + 32u, last)]), a1);
            if p.dk > 64u {
                a2 = fma(wt, vec4<f32>(k[row + min(cl + 64u, last)]), a2);
                a3 = fma(wt, vec4<f32>(k[row + min(cl + 96u, last)]), a3);
            }
            if p.dk > 128u {
                a4 = fma(wt, vec4<f32>(k[row + min(cl + 128u, last)]), a4);
                a5 = fma(wt, vec4<f32>(k[row + min(cl + 160u, last)]), a5);
                a6 = fma(wt, vec4<f32>(k[row + min(cl + 192u, last)]), a6);
                a7 = fma(wt, vec4<f32>(k[row + min(cl + 224u, last)]), a7);
            }
        }
        workgroupBarrier();
    }
    let dq_at = p.dq_offset + split * p.n * p.n_head * p.dk;
    put_dq(p.scale * a0, cl, g, e0 + r0, dq_at);
    put_dq(p.scale * a1, cl + 32u, g, e0 + r0, dq_at);
    put_dq(p.scale * a2, cl + 64u, g, e0 + r0, dq_at);
    put_dq(p.scale * a3, cl + 96u, g, e0 + r0, dq_at);
    put_dq(p.scale * a4, cl + 128u, g, e0 + r0, dq_at);
    put_dq(p.scale * a5, cl + 160u, g, e0 + r0, dq_at);
    put_dq(p.scale * a6, cl + 192u, g, e0 + r0, dq_at);
    put_dq(p.scale * a7, cl + 224u, g, e0 + r0, dq_at);
}

// Column `col` of pairs e .. e + 3 (of kv head g) into dq from `dq_at`, those inside.
fn put_dq(a: vec4<f32>, col: u32, g: u32, e: u32, dq_at: u32) {
    if col >= p.dk {
        return;
    }
    let pairs = pair_count();
    if e < pairs {
        dq[dq_at + pair_row(g, e) * p.dk + col] = a.x;
    }
    if e + 1u < pairs {
        dq[dq_at + pair_row(g, e + 1u) * p.dk + col] = a.y;
    }
    if e + 2u < pairs {
        dq[dq_at + pair_row(g, e + 2u) * p.dk + col] = a.z;
    }
    if e + 3u < pairs {
        dq[dq_at + pair_row(g, e + 3u) * p.dk + col] = a.w;
    }
}
