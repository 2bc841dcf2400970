// The training attention forward's second half when its keys are split (ops/attention_train.rs,
// `forward_split_ops`): split s left, per (row, head) r, its running max m_s, its sum l_s of
// exp(s - m_s) and its unnormalised output acc_s = sum exp(s - m_s) v over its share of the
// keys. With m = max_s m_s and w_s = exp(m_s - m) (0 for a split that saw no key: m_s is LOW),
// l = sum_s w_s l_s, o = sum_s w_s acc_s / l and lse = m + log l, as the unsplit kernel's online
// softmax would have rescaled them. One invocation an element of o. Also the prompt attention's
// combine (attention/attention_coop.wgsl with split keys), which wants no lse: lse_offset
// NO_LSE.

struct Params {
    rows: u32,
    dv: u32,
    splits: u32,
    acc_offset: u32,
    ml_offset: u32,
    o_offset: u32,
    lse_offset: u32,
    _pad: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> parts: array<f32>;
@group(0) @binding(2) var<storage, read_write> o: array<f32>;
@group(0) @binding(3) var<storage, read_write> lse: array<f32>;

override WG: u32 = 256u;
const LOW: f32 = -3.0e38;
const NO_LSE: u32 = 0xffffffffu;

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) tid: u32,
) {
    let i = (wid.y * nwg.x + wid.x) * WG + tid;
    if i >= p.rows * p.dv {
        return;
    }
    let r = i / p.dv;
    var m = LOW;
    for (var s = 0u; s < p.splits; s++) {
        m = max(m, parts[p.ml_offset + s * p.rows + r]);
    }
    var l = 0.0;
    var acc = 0.0;
    for (var s = 0u; s < p.splits; s++) {
        let w = exp(parts[p.ml_offset + s * p.rows + r] - m);
        l = fma(w, parts[p.ml_offset + (p.splits + s) * p.rows + r], l);
        acc = fma(w, parts[p.acc_offset + s * p.rows * p.dv + i], acc);
    }
    o[p.o_offset + i] = acc / l;
    if p.lse_offset != NO_LSE && i % p.dv == 0u {
        lse[p.lse_offset + r] = m + log(l);
    }
}
