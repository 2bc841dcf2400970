// The draw over the best K candidates (sorted best first by `topk.wgsl`), with the CPU
// sampler's chain and arithmetic (`crates/model/src/sampler/`): top-k -> top-p -> min-p ->
// temperature -> softmax -> inverse-CDF draw with the uniform number `u` from the host's
// random stream. Top-p and min-p see the temperature-1 distribution (llama.cpp's order).
// Writes the token id to out[out_index]; NONE when no logit is finite (the CPU's
// NoFiniteLogits). At most K = 128 candidates: one invocation walks them in order, as the
// CPU does (the sums must run in the same order to round the same way), over values the
// workgroup's K invocations first compute at once into workgroup memory, one candidate each
// (its logit and exponentials: the same expressions as the CPU's, so the same values). One
// invocation doing all of it took ~20 us on the H100, its arrays in local memory.

struct Params {
    src_offset: u32,
    out_index: u32,
    // 1..=K.
    k: u32,
    min_keep: u32,
    // <= 0: greedy (the best candidate, no draw).
    temperature: f32,
    // >= 1: off.
    top_p: f32,
    // <= 0: off.
    min_p: f32,
    // ln(min_p), computed by the host in f32 as the CPU sampler does, so the threshold
    // max + ln(min_p) is the same correctly rounded sum on both sides.
    ln_min_p: f32,
    // Uniform in [0, 1), a multiple of 2^-24.
    u: f32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> cand: array<vec2<u32>>;
@group(0) @binding(2) var<storage, read_write> out: array<u32>;

// One invocation per candidate for the elementwise part: K.
override WG: u32 = 128u;
const K: u32 = 128u;
const NONE: u32 = 0xffffffffu;
const NEG_INF_KEY: u32 = 0x007fffffu;
const NEG_INF_BITS: u32 = 0xff800000u;
const POS_INF_BITS: u32 = 0x7f800000u;

// The inverse of topk.wgsl's order_key.
fn logit(key: u32) -> f32 {
    if (key & 0x80000000u) != 0u {
        return bitcast<f32>(key & 0x7fffffffu);
    }
    return bitcast<f32>(~key);
}

fn is_finite(v: f32) -> bool {
    return (bitcast<u32>(v) & 0x7fffffffu) < 0x7f800000u;
}

// exp(l - m), exactly 1 at l == m (so +inf logits share the mass instead of making NaN) and
// 0 for -inf or under a +inf maximum, spelled out because WGSL leaves exp of infinities open.
fn shifted_exp(l: f32, m: f32) -> f32 {
    if bitcast<u32>(l) == bitcast<u32>(m) {
        return 1.0;
    }
    if bitcast<u32>(l) == NEG_INF_BITS || bitcast<u32>(m) == POS_INF_BITS {
        return 0.0;
    }
    return exp(l - m);
}

// The candidates, copied from `cand`, and what every candidate's part of the draw needs that
// does not depend on the others (computed by its own invocation): its logit, exp(l - max),
// and the same at the temperature.
var<workgroup> cs: array<vec2<u32>, K>;
var<workgroup> ls: array<f32, K>;
var<workgroup> e1: array<f32, K>;
var<workgroup> e2: array<f32, K>;

// l / temperature where that applies (finite l, temperature not 1), as the CPU divides.
fn tempered(l: f32) -> f32 {
    if p.temperature != 1.0 && is_finite(l) {
        return l / p.temperature;
    }
    return l;
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) tid: u32) {
    let m = logit(cand[p.src_offset].x);
    for (var i = tid; i < K; i += WG) {
        let c = cand[p.src_offset + i];
        let l = logit(c.x);
        cs[i] = c;
        ls[i] = l;
        e1[i] = shifted_exp(l, m);
        e2[i] = shifted_exp(tempered(l), tempered(m));
    }
    workgroupBarrier();
    if tid == 0u {
        draw();
    }
}

// The CPU sampler's walk over the sorted candidates: the sums in its order.
fn draw() {
    let k = min(max(p.k, 1u), K);
    var n = 0u;
    while n < k && cs[n].y != NONE {
        n += 1u;
    }
    // Sorted: the first is the maximum; -inf there means nothing is finite.
    if n == 0u || cs[0].x == NEG_INF_KEY {
        out[p.out_index] = NONE;
        return;
    }
    if p.temperature <= 0.0 {
        out[p.out_index] = cs[0].y;
        return;
    }
    let m = ls[0];
    if p.top_p < 1.0 {
        var sum = 0.0;
        for (var i = 0u; i < n; i++) {
            sum += e1[i];
        }
        let inv = 1.0 / sum;
        var cum = 0.0;
        var keep = n;
        for (var i = 0u; i < n; i++) {
            cum += e1[i] * inv;
            if cum >= p.top_p && i + 1u >= p.min_keep {
                keep = i + 1u;
                break;
            }
        }
        n = keep;
    }
    if p.min_p > 0.0 {
        let threshold = m + p.ln_min_p;
        var keep = n;
        for (var i = 1u; i < n; i++) {
            if ls[i] < threshold && i >= p.min_keep {
                keep = i;
                break;
            }
        }
        n = keep;
    }
    if n == 1u {
        out[p.out_index] = cs[0].y;
        return;
    }
    // Dividing by t > 0 keeps the order: the first is still the maximum (e2 is relative to it).
    var sum = 0.0;
    for (var i = 0u; i < n; i++) {
        sum += e2[i];
    }
    let inv = 1.0 / sum;
    var total = 0.0;
    for (var i = 0u; i < n; i++) {
        e2[i] *= inv;
        total += e2[i];
    }
    let goal = p.u * total;
    var cum = 0.0;
    for (var i = 0u; i < n; i++) {
        cum += e2[i];
        if cum > goal {
            out[p.out_index] = cs[i].y;
            return;
        }
    }
    // Rounding left the sum short of the target: the last token that can be drawn.
    var last = 0u;
    for (var i = 0u; i < n; i++) {
        if e2[i] > 0.0 {
            last = i;
        }
    }
    out[p.out_index] = cs[last].y;
}
