// Causal attention over a block of rows without a KV cache, for training (with
// attention/train_params.wgsl): o = softmax(cap(scale q k^T)) v per query head, and the
// log-sum-exp of each (row, head)'s scores for the backward. One workgroup per (row, head),
// its 64 invocations GROUPS groups of LANES, one key per group at a time: a group's lanes
// stride over the head's dims (q's row held for their own dims), so every row of k and v is
// read once, in consecutive words across the lanes. The score's dot product is the lanes'
// partial sums added in lane order through workgroup memory. Each group keeps an online
// softmax (running max m and sum l, its output dims rescaled by exp(m_old - m_new)), so
// nothing of size n^2 exists; at the end the groups' (m, l, o) merge in group order as flash
// attention's splits do.

@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> k: array<f32>;
@group(0) @binding(3) var<storage, read> v: array<f32>;
@group(0) @binding(4) var<storage, read> start: array<u32>;
@group(0) @binding(5) var<storage, read_write> o: array<f32>;
@group(0) @binding(6) var<storage, read_write> lse: array<f32>;

const LANES: u32 = 32u;
const GROUPS: u32 = 2u;
// Dims a lane owns: d = lane + LANES r for r < PL.
const PL: u32 = MAXD / LANES;

var<workgroup> partial: array<f32, GROUPS * LANES>;
// The groups' output sums, running maxima and sums, for the merge.
var<workgroup> sums: array<f32, GROUPS * MAXD>;
var<workgroup> ms: array<f32, GROUPS>;
var<workgroup> ls: array<f32, GROUPS>;
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
    for (var r = 0u; r < PL; r++) {
        let d = lane + LANES * r;
        if d < p.dk {
            qr[r] = q[p.q_offset + idx * p.dk + d];
        }
    }
    if tid == 0u {
        lo_shared = first_key(i, start[p.start_offset + i]);
    }
    // Uniform for the loop's barriers: start[] is a storage read.
    let lo = workgroupUniformLoad(&lo_shared);
    var m = LOW;
    var l = 0.0;
    var acc: array<f32, PL>;
    for (var j0 = lo; j0 <= i; j0 += GROUPS) {
        let j = j0 + grp;
        let live = j <= i;
        var dot = 0.0;
        if live {
            let k_row = p.k_offset + (j * p.n_kv + kvh) * p.dk;
            for (var r = 0u; r < PL; r++) {
                let d = lane + LANES * r;
                if d < p.dk {
                    dot = fma(qr[r], k[k_row + d], dot);
                }
            }
        }
        partial[tid] = dot;
        workgroupBarrier();
        dot = 0.0;
        for (var e = 0u; e < LANES; e++) {
            dot += partial[grp * LANES + e];
        }
        workgroupBarrier();
        if live {
            let s = score(p.scale * dot).s;
            let m_new = max(m, s);
            let alpha = exp(m - m_new);
            let pj = exp(s - m_new);
            l = l * alpha + pj;
            let v_row = p.v_offset + (j * p.n_kv + kvh) * p.dv;
            for (var r = 0u; r < PL; r++) {
                let d = lane + LANES * r;
                if d < p.dv {
                    acc[r] = fma(pj, v[v_row + d], acc[r] * alpha);
                }
            }
            m = m_new;
        }
    }
    for (var r = 0u; r < PL; r++) {
        let d = lane + LANES * r;
        if d < p.dv {
            sums[grp * MAXD + d] = acc[r];
        }
    }
    if lane == 0u {
        ms[grp] = m;
        ls[grp] = l;
    }
    workgroupBarrier();
    var big = LOW;
    for (var c = 0u; c < GROUPS; c++) {
        big = max(big, ms[c]);
    }
    var total = 0.0;
    for (var c = 0u; c < GROUPS; c++) {
        total += ls[c] * exp(ms[c] - big);
    }
    let o_row = p.o_offset + idx * p.dv;
    for (var d = tid; d < p.dv; d += WG) {
        var s = 0.0;
        for (var c = 0u; c < GROUPS; c++) {
            s = fma(sums[c * MAXD + d], exp(ms[c] - big), s);
        }
        o[o_row + d] = s / total;
    }
    if tid == 0u {
        lse[p.lse_offset + idx] = big + log(total);
    }
}
