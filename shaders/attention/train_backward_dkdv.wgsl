// The training attention's backward, dk and dv (with attention/train_params.wgsl): one
// workgroup per (key row j, kv head g) owns that row of dk and dv (WGSL has no float atomics,
// so no two workgroups may add into one element). It walks the (query row i, query head h)
// pairs that see key j (i from j up to its sequence's end or the window's, start[i] <= j; h
// over g's GQA group), recomputing each pair's weight from the forward's log-sum-exp:
// p = exp(s - lse_ih), ds = p (do_ih . v_j - D_ih) cap' with D_ih = do_ih . o_ih; then
// dv_j = sum p do_ih and dk_j = scale sum ds q_ih.
//
// The 64 invocations are GROUPS groups of LANES, one pair per group at a time: a group's lanes
// stride over the head's dims, so every row of q, do and o is read once, in consecutive words
// across the lanes, and each lane keeps the values it read for its own dims' dk and dv sums.
// The three dot products of a pair are each lane's partial sums added in lane order through
// workgroup memory; at the end the groups' sums are added in group order.

@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> k: array<f32>;
@group(0) @binding(3) var<storage, read> v: array<f32>;
@group(0) @binding(4) var<storage, read> o: array<f32>;
@group(0) @binding(5) var<storage, read> lse: array<f32>;
@group(0) @binding(6) var<storage, read> dout: array<f32>;
@group(0) @binding(7) var<storage, read> start: array<u32>;
@group(0) @binding(8) var<storage, read_write> dk_out: array<f32>;
@group(0) @binding(9) var<storage, read_write> dv_out: array<f32>;

const LANES: u32 = 32u;
const GROUPS: u32 = 2u;
// Dims a lane owns: d = lane + LANES r for r < PL.
const PL: u32 = MAXD / LANES;

// Each invocation's three partial dot products of the round.
var<workgroup> partial: array<f32, 3u * GROUPS * LANES>;
// The groups' dk (then dv) sums, for the final addition.
var<workgroup> sums: array<f32, GROUPS * MAXD>;
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
    let lane = tid % LANES;
    let grp = tid / LANES;
    var kr: array<f32, PL>;
    var vr: array<f32, PL>;
    for (var r = 0u; r < PL; r++) {
        let d = lane + LANES * r;
        if d < p.dk {
            kr[r] = k[p.k_offset + idx * p.dk + d];
        }
        if d < p.dv {
            vr[r] = v[p.v_offset + idx * p.dv + d];
        }
    }
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
    var dk_acc: array<f32, PL>;
    var dv_acc: array<f32, PL>;
    for (var e0 = 0u; e0 < pairs; e0 += GROUPS) {
        let e = e0 + grp;
        var row = 0u;
        var live = false;
        if e < pairs {
            let i = j + e / group;
            row = i * p.n_head + g * group + e % group;
            live = start[p.start_offset + i] <= j;
        }
        var qv: array<f32, PL>;
        var dov: array<f32, PL>;
        var dot = 0.0;
        var dp = 0.0;
        var delta = 0.0;
        if live {
            for (var r = 0u; r < PL; r++) {
                let d = lane + LANES * r;
                if d < p.dk {
                    qv[r] = q[p.q_offset + row * p.dk + d];
                    dot = fma(qv[r], kr[r], dot);
                }
                if d < p.dv {
                    dov[r] = dout[p.do_offset + row * p.dv + d];
                    dp = fma(dov[r], vr[r], dp);
                    delta = fma(dov[r], o[p.o_offset + row * p.dv + d], delta);
                }
            }
        }
        partial[3u * tid] = dot;
        partial[3u * tid + 1u] = dp;
        partial[3u * tid + 2u] = delta;
        workgroupBarrier();
        dot = 0.0;
        dp = 0.0;
        delta = 0.0;
        for (var l = 0u; l < LANES; l++) {
            let at = 3u * (grp * LANES + l);
            dot += partial[at];
            dp += partial[at + 1u];
            delta += partial[at + 2u];
        }
        workgroupBarrier();
        if live {
            let sc = score(p.scale * dot);
            let pr = exp(sc.s - lse[p.lse_offset + row]);
            let ds = pr * (dp - delta) * sc.grad;
            for (var r = 0u; r < PL; r++) {
                dk_acc[r] = fma(ds, qv[r], dk_acc[r]);
                dv_acc[r] = fma(pr, dov[r], dv_acc[r]);
            }
        }
    }
    for (var r = 0u; r < PL; r++) {
        let d = lane + LANES * r;
        if d < p.dk {
            sums[grp * MAXD + d] = dk_acc[r];
        }
    }
    workgroupBarrier();
    for (var d = tid; d < p.dk; d += WG) {
        var s = 0.0;
        for (var c = 0u; c < GROUPS; c++) {
            s += sums[c * MAXD + d];
        }
        dk_out[p.dk_offset + idx * p.dk + d] = p.scale * s;
    }
    workgroupBarrier();
    for (var r = 0u; r < PL; r++) {
        let d = lane + LANES * r;
        if d < p.dv {
            sums[grp * MAXD + d] = dv_acc[r];
        }
    }
    workgroupBarrier();
    for (var d = tid; d < p.dv; d += WG) {
        var s = 0.0;
        for (var c = 0u; c < GROUPS; c++) {
            s += sums[c * MAXD + d];
        }
        dv_out[p.dv_offset + idx * p.dv + d] = s;
    }
}
