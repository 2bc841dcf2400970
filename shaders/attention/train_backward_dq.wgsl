// The training attention's backward, dq (with attention/train_params.wgsl): one workgroup
// per (row i, query head h) walks the keys row i sees, recomputing each weight from the
// forward's log-sum-exp: p_j = exp(s_j - lse_i), dp_j = do_i . v_j, ds_j = p_j (dp_j - D_i)
// cap'_j with D_i = do_i . o_i, and dq_i = scale sum_j ds_j k_j. The workgroup owns its row of
// dq, so no two workgroups write one element (WGSL has no float atomics).
//
// The 64 invocations are GROUPS groups of LANES, one key per group at a time: a group's lanes
// stride over the head's dims (q_i and do_i held for their own dims), so every row of k and v
// is read once, in consecutive words across the lanes, and each lane keeps the k values it
// read for its dims' dq sums. Dot products: each lane's partial sums added in lane order
// through workgroup memory; at the end the groups' sums are added in group order.

@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> k: array<f32>;
@group(0) @binding(3) var<storage, read> v: array<f32>;
@group(0) @binding(4) var<storage, read> o: array<f32>;
@group(0) @binding(5) var<storage, read> lse: array<f32>;
@group(0) @binding(6) var<storage, read> dout: array<f32>;
@group(0) @binding(7) var<storage, read> start: array<u32>;
@group(0) @binding(8) var<storage, read_write> dq: array<f32>;

const LANES: u32 = 32u;
const GROUPS: u32 = 2u;
// Dims a lane owns: d = lane + LANES r for r < PL.
const PL: u32 = MAXD / LANES;

// Each invocation's two partial dot products of the round.
var<workgroup> partial: array<f32, 2u * GROUPS * LANES>;
// The groups' dq sums, for the final addition.
var<workgroup> sums: array<f32, GROUPS * MAXD>;
var<workgroup> lo_shared: u32;

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) tid: u32,
) {
    let idx = group_index(wid, nwg);
    if idx >= p.n * p.n_head {
        return;
    }
    let i = idx / p.n_head;
    let h = idx % p.n_head;
    let kvh = h / (p.n_head / p.n_kv);
    let lane = tid % LANES;
    let grp = tid / LANES;
    var qr: array<f32, PL>;
    var dor: array<f32, PL>;
    // D_i = do_i . o_i: each lane's dims (both groups alike), then the group's partials.
    var part = 0.0;
    for (var r = 0u; r < PL; r++) {
        let d = lane + LANES * r;
        if d < p.dk {
            qr[r] = q[p.q_offset + idx * p.dk + d];
        }
        if d < p.dv {
            let g = dout[p.do_offset + idx * p.dv + d];
            dor[r] = g;
            part = fma(g, o[p.o_offset + idx * p.dv + d], part);
        }
    }
    partial[tid] = part;
    if tid == 0u {
        lo_shared = first_key(i, start[p.start_offset + i]);
    }
    // Uniform for the loop's barriers (start[] is a storage read); also the barrier after
    // partial.
    let lo = workgroupUniformLoad(&lo_shared);
    var delta = 0.0;
    for (var l = 0u; l < LANES; l++) {
        delta += partial[grp * LANES + l];
    }
    let li = lse[p.lse_offset + idx];
    var acc: array<f32, PL>;
    workgroupBarrier();
    for (var j0 = lo; j0 <= i; j0 += GROUPS) {
        let j = j0 + grp;
        let live = j <= i;
        var kv: array<f32, PL>;
        var dot = 0.0;
        var dp = 0.0;
        if live {
            let k_row = p.k_offset + (j * p.n_kv + kvh) * p.dk;
            let v_row = p.v_offset + (j * p.n_kv + kvh) * p.dv;
            for (var r = 0u; r < PL; r++) {
                let d = lane + LANES * r;
                if d < p.dk {
                    kv[r] = k[k_row + d];
                    dot = fma(qr[r], kv[r], dot);
                }
                if d < p.dv {
                    dp = fma(dor[r], v[v_row + d], dp);
                }
            }
        }
        partial[2u * tid] = dot;
        partial[2u * tid + 1u] = dp;
        workgroupBarrier();
        dot = 0.0;
        dp = 0.0;
        for (var l = 0u; l < LANES; l++) {
            let at = 2u * (grp * LANES + l);
            dot += partial[at];
            dp += partial[at + 1u];
        }
        workgroupBarrier();
        if live {
            let sc = score(p.scale * dot);
            let pr = exp(sc.s - li);
            let ds = pr * (dp - delta) * sc.grad;
            for (var r = 0u; r < PL; r++) {
                acc[r] = fma(ds, kv[r], acc[r]);
            }
        }
    }
    for (var r = 0u; r < PL; r++) {
        let d = lane + LANES * r;
        if d < p.dk {
            sums[grp * MAXD + d] = acc[r];
        }
    }
    workgroupBarrier();
    for (var d = tid; d < p.dk; d += WG) {
        var s = 0.0;
        for (var c = 0u; c < GROUPS; c++) {
            s += sums[c * MAXD + d];
        }
        dq[p.dq_offset + idx * p.dk + d] = p.scale * s;
    }
}
