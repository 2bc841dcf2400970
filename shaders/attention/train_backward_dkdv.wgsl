// The training attention's backward, dk and dv (with attention/train_params.wgsl,
// attention/train_tiles.wgsl and attention/train_backward_tiles.wgsl): one workgroup per (tile
// of BK key rows, kv head, COLS columns) owns those rows of dk and dv (WGSL has no float
// atomics, so no two workgroups may add into one element). It walks the (query row, head)
// pairs that may see its keys (rows from its first key up to its last key's sequence end or
// window) in tiles of BQ, recomputing each weight from the forward's log-sum-exp:
// p = exp(s - lse_ih), ds = p (do_ih . v_j - D_ih) cap' with D_ih = do_ih . o_ih; then
// dv_j = sum p do_ih and dk_j = scale sum ds q_ih. With p.pair_splits > 1 the grid's z also walks
// splits of each key tile's pairs, split s writing its partial sums to slice s of dk_out and
// of dv_out (a split sum adds them up): the first key tile of a sequence, which every later
// row sees, is then not walked by one workgroup alone.

@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> k: array<f32>;
@group(0) @binding(3) var<storage, read> v: array<f32>;
@group(0) @binding(4) var<storage, read> o: array<f32>;
@group(0) @binding(5) var<storage, read> lse: array<f32>;
@group(0) @binding(6) var<storage, read> dout: array<f32>;
@group(0) @binding(7) var<storage, read> start: array<u32>;
@group(0) @binding(8) var<storage, read_write> dk_out: array<f32>;
@group(0) @binding(9) var<storage, read_write> dv_out: array<f32>;

// The tile's (p, ds) per (pair, key).
var<workgroup> pt: array<vec2<f32>, 1056>; // BQ * RP
var<workgroup> end_shared: u32;

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) tid: u32,
) {
    let blocks = (p.n + BK - 1u) / BK;
    let idx = group_index(wid, nwg);
    if idx >= blocks * p.n_kv {
        return;
    }
    let g = idx / blocks;
    let j0 = (idx % blocks) * BK;
    let j_last = min(j0 + BK, p.n) - 1u;
    let col0 = z_slice(wid.z).col0;
    let split = z_slice(wid.z).split;
    let r = tid / 8u;
    let c = tid % 8u;
    let w = tid / 32u;
    let lane = tid % 32u;
    // The rows that may see the tile's keys: from j0 to the end of j_last's sequence. Rows of
    // a sequence are consecutive and start[] does not decrease, so that end is the first row
    // whose sequence starts after j_last: found by bisection, not by walking the block's later
    // sequences (a packed batch's, which never see these keys).
    if tid == 0u {
        var lo_i = j_last + 1u;
        var end = p.n;
        while lo_i < end {
            let mid = (lo_i + end) / 2u;
            if start[p.start_offset + mid] > j_last {
                end = mid;
            } else {
                lo_i = mid + 1u;
            }
        }
        end_shared = end;
    }
    // Uniform for the loop's barriers: start[] is a storage read.
    var row_end = workgroupUniformLoad(&end_shared);
    if p.window > 0u {
        row_end = min(row_end, j_last + p.window);
    }
    // This split's share of the pair tiles.
    let e_span = split_share(j0 * group_size(), row_end * group_size(), BQ, p.pair_splits, split);
    let e_end = e_span.y;
    var dk_acc: array<vec4<f32>, 8>;
    var dv_acc: array<vec4<f32>, 8>;
    for (var e0 = e_span.x; e0 < e_end; e0 += BQ) {
        let me = sight(e0 + r);
        var li = 0.0;
        if me.valid {
            li = lse[p.lse_offset + pair_row(g, e0 + r)];
        }
        let raw = qk_dots(g, e0, j0, tid);
        let dp = dov_dots(g, e0, j0, tid);
        workgroupBarrier();
        let delta = pair_delta(r);
        for (var u = 0u; u < 4u; u++) {
            var pr = 0.0;
            var ds = 0.0;
            if sees(me, j0 + c + 8u * u) {
                let sc = score(p.scale * raw[u]);
                pr = exp(sc.s - li);
                ds = pr * (dp[u] - delta) * sc.grad;
            }
            pt[r * RP + c + 8u * u] = vec2<f32>(pr, ds);
        }
        workgroupBarrier();
        let k0 = 4u * w;
        let count = min(BQ, e_end - e0);
        for (var x = 0u; x < count; x++) {
            let t0 = pt[x * RP + k0];
            let t1 = pt[x * RP + k0 + 1u];
            let t2 = pt[x * RP + k0 + 2u];
            let t3 = pt[x * RP + k0 + 3u];
            let pr = vec4<f32>(t0.x, t1.x, t2.x, t3.x);
            let ds = vec4<f32>(t0.y, t1.y, t2.y, t3.y);
            let row = pair_row(g, e0 + x);
            for (var u = 0u; u < 8u; u++) {
                let col = col0 + lane + 32u * u;
                if col < p.dk {
                    dk_acc[u] = fma(ds, vec4<f32>(q[p.q_offset + row * p.dk + col]), dk_acc[u]);
                }
                if col < p.dv {
                    dv_acc[u] = fma(pr, vec4<f32>(dout[p.do_offset + row * p.dv + col]), dv_acc[u]);
                }
            }
        }
        workgroupBarrier();
    }
    let dk_at = p.dk_offset + split * p.n * p.n_kv * p.dk;
    let dv_at = p.dv_offset + split * p.n * p.n_kv * p.dv;
    for (var u = 0u; u < 8u; u++) {
        let col = col0 + lane + 32u * u;
        for (var ru = 0u; ru < 4u; ru++) {
            let j = j0 + 4u * w + ru;
            if j < p.n && col < p.dk {
                dk_out[dk_at + (j * p.n_kv + g) * p.dk + col] = p.scale * dk_acc[u][ru];
            }
            if j < p.n && col < p.dv {
                dv_out[dv_at + (j * p.n_kv + g) * p.dv + col] = dv_acc[u][ru];
            }
        }
    }
}
