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
    // dk's (k_u) and dv's (v_u) accumulators in named registers, as the forward's o: rows
    // (keys) 4 w .. 4 w + 3, column col0 + lane + 32 u.
    var k0 = vec4<f32>(0.0);
    var k1 = vec4<f32>(0.0);
    var k2 = vec4<f32>(0.0);
    var k3 = vec4<f32>(0.0);
    var k4 = vec4<f32>(0.0);
    var k5 = vec4<f32>(0.0);
    var k6 = vec4<f32>(0.0);
    var k7 = vec4<f32>(0.0);
    var v0 = vec4<f32>(0.0);
    var v1 = vec4<f32>(0.0);
    var v2 = vec4<f32>(0.0);
    var v3 = vec4<f32>(0.0);
    var v4 = vec4<f32>(0.0);
    var v5 = vec4<f32>(0.0);
    var v6 = vec4<f32>(0.0);
    var v7 = vec4<f32>(0.0);
    let cl = col0 + lane;
    let lk = p.dk - 1u;
    let lv = p.dv - 1u;
    let r0 = 4u * w;
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
        let vis = sees4(me, j0 + c);
        let sc = score4(p.scale * raw);
        let pr = select(vec4<f32>(0.0), exp(sc.s - li), vis);
        let ds = pr * (dp - delta) * sc.grad;
        let at = r * RP + c;
        pt[at] = vec2<f32>(pr.x, ds.x);
        pt[at + 8u] = vec2<f32>(pr.y, ds.y);
        pt[at + 16u] = vec2<f32>(pr.z, ds.z);
        pt[at + 24u] = vec2<f32>(pr.w, ds.w);
        workgroupBarrier();
        // Columns past dk (dv) are clamped (read, never stored); slots wholly past skipped.
        let count = min(BQ, e_end - e0);
        for (var x = 0u; x < count; x++) {
            let t0 = pt[x * RP + r0];
            let t1 = pt[x * RP + r0 + 1u];
            let t2 = pt[x * RP + r0 + 2u];
            let t3 = pt[x * RP + r0 + 3u];
            let wp = vec4<f32>(t0.x, t1.x, t2.x, t3.x);
            let wd = vec4<f32>(t0.y, t1.y, t2.y, t3.y);
            let row = pair_row(g, e0 + x);
            let qr = p.q_offset + row * p.dk;
            let dr = p.do_offset + row * p.dv;
            k0 = fma(wd, vec4<f32>(q[qr + min(cl, lk)]), k0);
            k1 = fma(wd, vec4<f32>(q[qr + min(cl + 32u, lk)]), k1);
            v0 = fma(wp, vec4<f32>(dout[dr + min(cl, lv)]), v0);
            v1 = fma(wp, vec4<f32>(dout[dr + min(cl + 32u, lv)]), v1);
            if p.dk > 64u {
                k2 = fma(wd, vec4<f32>(q[qr + min(cl + 64u, lk)]), k2);
                k3 = fma(wd, vec4<f32>(q[qr + min(cl + 96u, lk)]), k3);
            }
            if p.dv > 64u {
                v2 = fma(wp, vec4<f32>(dout[dr + min(cl + 64u, lv)]), v2);
                v3 = fma(wp, vec4<f32>(dout[dr + min(cl + 96u, lv)]), v3);
            }
            if p.dk > 128u {
                k4 = fma(wd, vec4<f32>(q[qr + min(cl + 128u, lk)]), k4);
                k5 = fma(wd, vec4<f32>(q[qr + min(cl + 160u, lk)]), k5);
                k6 = fma(wd, vec4<f32>(q[qr + min(cl + 192u, lk)]), k6);
                k7 = fma(wd, vec4<f32>(q[qr + min(cl + 224u, lk)]), k7);
            }
            if p.dv > 128u {
                v4 = fma(wp, vec4<f32>(dout[dr + min(cl + 128u, lv)]), v4);
                v5 = fma(wp, vec4<f32>(dout[dr + min(cl + 160u, lv)]), v5);
                v6 = fma(wp, vec4<f32>(dout[dr + min(cl + 192u, lv)]), v6);
                v7 = fma(wp, vec4<f32>(dout[dr + min(cl + 224u, lv)]), v7);
            }
        }
        workgroupBarrier();
    }
    let dk_at = p.dk_offset + split * p.n * p.n_kv * p.dk;
    let dv_at = p.dv_offset + split * p.n * p.n_kv * p.dv;
    let j = j0 + r0;
    put_dk(p.scale * k0, cl, g, j, dk_at);
    put_dk(p.scale * k1, cl + 32u, g, j, dk_at);
    put_dk(p.scale * k2, cl + 64u, g, j, dk_at);
    put_dk(p.scale * k3, cl + 96u, g, j, dk_at);
    put_dk(p.scale * k4, cl + 128u, g, j, dk_at);
    put_dk(p.scale * k5, cl + 160u, g, j, dk_at);
    put_dk(p.scale * k6, cl + 192u, g, j, dk_at);
    put_dk(p.scale * k7, cl + 224u, g, j, dk_at);
    put_dv(v0, cl, g, j, dv_at);
    put_dv(v1, cl + 32u, g, j, dv_at);
    put_dv(v2, cl + 64u, g, j, dv_at);
    put_dv(v3, cl + 96u, g, j, dv_at);
    put_dv(v4, cl + 128u, g, j, dv_at);
    put_dv(v5, cl + 160u, g, j, dv_at);
    put_dv(v6, cl + 192u, g, j, dv_at);
    put_dv(v7, cl + 224u, g, j, dv_at);
}

// Column `col` of key rows j .. j + 3 (of kv head g) into dk_out from `at`, those inside.
fn put_dk(a: vec4<f32>, col: u32, g: u32, j: u32, at: u32) {
    if col >= p.dk {
        return;
    }
    let base = at + g * p.dk + col;
    let stride = p.n_kv * p.dk;
    if j < p.n {
        dk_out[base + j * stride] = a.x;
    }
    if j + 1u < p.n {
        dk_out[base + (j + 1u) * stride] = a.y;
    }
    if j + 2u < p.n {
        dk_out[base + (j + 2u) * stride] = a.z;
    }
    if j + 3u < p.n {
        dk_out[base + (j + 3u) * stride] = a.w;
    }
}

// Column `col` of key rows j .. j + 3 (of kv head g) into dv_out from `at`, those inside.
fn put_dv(a: vec4<f32>, col: u32, g: u32, j: u32, at: u32) {
    if col >= p.dv {
        return;
    }
    let base = at + g * p.dv + col;
    let stride = p.n_kv * p.dv;
    if j < p.n {
        dv_out[base + j * stride] = a.x;
    }
    if j + 1u < p.n {
        dv_out[base + (j + 1u) * stride] = a.y;
    }
    if j + 2u < p.n {
        dv_out[base + (j + 2u) * stride] = a.z;
    }
    if j + 3u < p.n {
        dv_out[base + (j + 3u) * stride] = a.w;
    }
}
