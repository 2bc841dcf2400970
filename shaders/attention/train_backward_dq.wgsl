// The training attention's backward, dq (with attention/train_params.wgsl): one workgroup
// per (row i, query head h) walks the keys row i sees in tiles of TILE, as the forward
// (attention/train_forward.wgsl) does, recomputing each weight from the forward's
// log-sum-exp: p_j = exp(s_j - lse_i), dp_j = do_i . v_j, ds_j = p_j (dp_j - D_i) cap'_j with
// D_i = do_i . o_i, and dq_i = scale sum_j ds_j k_j. The workgroup owns its row of dq, so no
// two workgroups write one element (WGSL has no float atomics).

@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> k: array<f32>;
@group(0) @binding(3) var<storage, read> v: array<f32>;
@group(0) @binding(4) var<storage, read> o: array<f32>;
@group(0) @binding(5) var<storage, read> lse: array<f32>;
@group(0) @binding(6) var<storage, read> dout: array<f32>;
@group(0) @binding(7) var<storage, read> start: array<u32>;
@group(0) @binding(8) var<storage, read_write> dq: array<f32>;

var<workgroup> qs: array<f32, MAXD>;
var<workgroup> dos: array<f32, MAXD>;
var<workgroup> dss: array<f32, TILE>;
var<workgroup> partial: array<f32, TILE>;
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
    for (var d = tid; d < p.dk; d += TILE) {
        qs[d] = q[p.q_offset + idx * p.dk + d];
    }
    // D_i = do_i . o_i: each invocation's dims, then its TILE partial sums.
    var part = 0.0;
    for (var d = tid; d < p.dv; d += TILE) {
        let g = dout[p.do_offset + idx * p.dv + d];
        dos[d] = g;
        part = fma(g, o[p.o_offset + idx * p.dv + d], part);
    }
    partial[tid] = part;
    if tid == 0u {
        lo_shared = first_key(i, start[p.start_offset + i]);
    }
    // Uniform for the loop's barriers (start[] is a storage read); also the barrier after
    // qs, dos and partial.
    let lo = workgroupUniformLoad(&lo_shared);
    var delta = 0.0;
    for (var e = 0u; e < TILE; e++) {
        delta += partial[e];
    }
    let li = lse[p.lse_offset + idx];
    var acc: array<f32, PER>;
    for (var t0 = lo; t0 <= i; t0 += TILE) {
        let j = t0 + tid;
        var ds = 0.0;
        if j <= i {
            let k_row = p.k_offset + (j * p.n_kv + kvh) * p.dk;
            var dot = 0.0;
            for (var d = 0u; d < p.dk; d++) {
                dot = fma(qs[d], k[k_row + d], dot);
            }
            let sc = score(p.scale * dot);
            let pr = exp(sc.s - li);
            let v_row = p.v_offset + (j * p.n_kv + kvh) * p.dv;
            var dp = 0.0;
            for (var d = 0u; d < p.dv; d++) {
                dp = fma(dos[d], v[v_row + d], dp);
            }
            ds = pr * (dp - delta) * sc.grad;
        }
        dss[tid] = ds;
        workgroupBarrier();
        let count = min(TILE, i + 1u - t0);
        for (var r = 0u; r < PER; r++) {
            let d = tid + r * TILE;
            if d < p.dk {
                var a = acc[r];
                for (var e = 0u; e < count; e++) {
                    a = fma(dss[e], k[p.k_offset + ((t0 + e) * p.n_kv + kvh) * p.dk + d], a);
                }
                acc[r] = a;
            }
        }
        workgroupBarrier();
    }
    for (var r = 0u; r < PER; r++) {
        let d = tid + r * TILE;
        if d < p.dk {
            dq[p.dq_offset + idx * p.dk + d] = p.scale * acc[r];
        }
    }
}
