// The training attention's backward, dk and dv (with attention/train_params.wgsl): one
// workgroup per (key row j, kv head g) owns that row of dk and dv (WGSL has no float atomics,
// so no two workgroups may add into one element). It walks the (query row i, query head h)
// pairs that see key j (i from j up to its sequence's end or the window's, start[i] <= j; h over
// g's GQA group) in tiles of TILE, one pair per invocation, recomputing the pair's weight
// from the forward's log-sum-exp: p = exp(s - lse_ih), ds = p (do_ih . v_j - D_ih) cap' with
// D_ih = do_ih . o_ih; then dv_j = sum p do_ih and dk_j = scale sum ds q_ih.

@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> k: array<f32>;
@group(0) @binding(3) var<storage, read> v: array<f32>;
@group(0) @binding(4) var<storage, read> o: array<f32>;
@group(0) @binding(5) var<storage, read> lse: array<f32>;
@group(0) @binding(6) var<storage, read> dout: array<f32>;
@group(0) @binding(7) var<storage, read> start: array<u32>;
@group(0) @binding(8) var<storage, read_write> dk_out: array<f32>;
@group(0) @binding(9) var<storage, read_write> dv_out: array<f32>;

var<workgroup> ks: array<f32, MAXD>;
var<workgroup> vs: array<f32, MAXD>;
var<workgroup> ps: array<f32, TILE>;
var<workgroup> dss: array<f32, TILE>;
var<workgroup> end_shared: u32;

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) tid: u32,
) {
    let idx = group_index(wid, nwg);
    if idx >= p.n * p.n_kv {
        return;
    }
    let j = idx / p.n_kv;
    let g = idx % p.n_kv;
    let group = p.n_head / p.n_kv;
    for (var d = tid; d < p.dk; d += TILE) {
        ks[d] = k[p.k_offset + idx * p.dk + d];
    }
    for (var d = tid; d < p.dv; d += TILE) {
        vs[d] = v[p.v_offset + idx * p.dv + d];
    }
    workgroupBarrier();
    // The queries that may see key j: j's own sequence's rows from j on. Rows of a sequence
    // are consecutive and start[] does not decrease, so its end is the first row whose
    // sequence starts after j: found by bisection, not by walking the block's later
    // sequences (a packed batch's, which never see j).
    if tid == 0u {
        var lo_i = j + 1u;
        var end = p.n;
        while lo_i < end {
            let mid = (lo_i + end) / 2u;
            if start[p.start_offset + mid] > j {
                end = mid;
            } else {
                lo_i = mid + 1u;
            }
        }
        end_shared = end;
    }
    // Uniform for the loop's barriers: start[] is a storage read.
    var hi = workgroupUniformLoad(&end_shared);
    if p.window > 0u {
        hi = min(hi, j + p.window);
    }
    let pairs = (hi - j) * group;
    var dk_acc: array<f32, PER>;
    var dv_acc: array<f32, PER>;
    for (var e0 = 0u; e0 < pairs; e0 += TILE) {
        let e = e0 + tid;
        var pr = 0.0;
        var ds = 0.0;
        if e < pairs {
            let i = j + e / group;
            let row = i * p.n_head + g * group + e % group;
            if start[p.start_offset + i] <= j {
                let q_row = p.q_offset + row * p.dk;
                var dot = 0.0;
                for (var d = 0u; d < p.dk; d++) {
                    dot = fma(q[q_row + d], ks[d], dot);
                }
                let sc = score(p.scale * dot);
                pr = exp(sc.s - lse[p.lse_offset + row]);
                let do_row = p.do_offset + row * p.dv;
                let o_row = p.o_offset + row * p.dv;
                var dp = 0.0;
                var delta = 0.0;
                for (var d = 0u; d < p.dv; d++) {
                    let gd = dout[do_row + d];
                    dp = fma(gd, vs[d], dp);
                    delta = fma(gd, o[o_row + d], delta);
                }
                ds = pr * (dp - delta) * sc.grad;
            }
        }
        ps[tid] = pr;
        dss[tid] = ds;
        workgroupBarrier();
        let count = min(TILE, pairs - e0);
        for (var r = 0u; r < PER; r++) {
            let d = tid + r * TILE;
            if d < p.dk || d < p.dv {
                var a = dk_acc[r];
                var b = dv_acc[r];
                for (var e = 0u; e < count; e++) {
                    let ee = e0 + e;
                    let row = (j + ee / group) * p.n_head + g * group + ee % group;
                    if d < p.dk {
                        a = fma(dss[e], q[p.q_offset + row * p.dk + d], a);
                    }
                    if d < p.dv {
                        b = fma(ps[e], dout[p.do_offset + row * p.dv + d], b);
                    }
                }
                dk_acc[r] = a;
                dv_acc[r] = b;
            }
        }
        workgroupBarrier();
    }
    for (var r = 0u; r < PER; r++) {
        let d = tid + r * TILE;
        if d < p.dk {
            dk_out[p.dk_offset + idx * p.dk + d] = p.scale * dk_acc[r];
        }
        if d < p.dv {
            dv_out[p.dv_offset + idx * p.dv + d] = dv_acc[r];
        }
    }
}
