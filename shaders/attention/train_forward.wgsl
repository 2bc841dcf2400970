// Causal attention over a block of rows without a KV cache, for training (with
// attention/train_params.wgsl): o = softmax(cap(scale q k^T)) v per query head, and the
// log-sum-exp of each (row, head)'s scores for the backward. One workgroup per (row, head):
// q's row in workgroup memory, keys in tiles of TILE (one score per invocation) with an
// online softmax (running max m and sum l, the accumulators rescaled by exp(m_old - m_new)),
// so nothing of size n^2 exists. Invocation tid accumulates the output dims tid, tid + TILE, ..

@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> k: array<f32>;
@group(0) @binding(3) var<storage, read> v: array<f32>;
@group(0) @binding(4) var<storage, read> start: array<u32>;
@group(0) @binding(5) var<storage, read_write> o: array<f32>;
@group(0) @binding(6) var<storage, read_write> lse: array<f32>;

var<workgroup> qs: array<f32, MAXD>;
var<workgroup> ss: array<f32, TILE>;
var<workgroup> ps: array<f32, TILE>;
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
    let q_row = p.q_offset + idx * p.dk;
    for (var d = tid; d < p.dk; d += TILE) {
        qs[d] = q[q_row + d];
    }
    if tid == 0u {
        lo_shared = first_key(i, start[p.start_offset + i]);
    }
    // Uniform for the loop's barriers: start[] is a storage read.
    let lo = workgroupUniformLoad(&lo_shared);
    var m = LOW;
    var l = 0.0;
    var acc: array<f32, PER>;
    for (var t0 = lo; t0 <= i; t0 += TILE) {
        let j = t0 + tid;
        var s = LOW;
        if j <= i {
            let k_row = p.k_offset + (j * p.n_kv + kvh) * p.dk;
            var dot = 0.0;
            for (var d = 0u; d < p.dk; d++) {
                dot = fma(qs[d], k[k_row + d], dot);
            }
            s = score(p.scale * dot).s;
        }
        ss[tid] = s;
        workgroupBarrier();
        let count = min(TILE, i + 1u - t0);
        var m_new = m;
        for (var e = 0u; e < count; e++) {
            m_new = max(m_new, ss[e]);
        }
        let alpha = exp(m - m_new);
        ps[tid] = exp(s - m_new);
        workgroupBarrier();
        var sum = 0.0;
        for (var e = 0u; e < count; e++) {
            sum += ps[e];
        }
        l = l * alpha + sum;
        for (var r = 0u; r < PER; r++) {
            let d = tid + r * TILE;
            if d < p.dv {
                var a = acc[r] * alpha;
                for (var e = 0u; e < count; e++) {
                    a = fma(ps[e], v[p.v_offset + ((t0 + e) * p.n_kv + kvh) * p.dv + d], a);
                }
                acc[r] = a;
            }
        }
        m = m_new;
        workgroupBarrier();
    }
    let o_row = p.o_offset + idx * p.dv;
    for (var r = 0u; r < PER; r++) {
        let d = tid + r * TILE;
        if d < p.dv {
            o[o_row + d] = acc[r] / l;
        }
    }
    if tid == 0u {
        lse[p.lse_offset + idx] = m + log(l);
    }
}
