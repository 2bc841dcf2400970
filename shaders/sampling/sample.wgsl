// The draw over the best K candidates (sorted best first by `topk.wgsl`), with the CPU
// sampler's chain and arithmetic (`crates/model/src/sampler/`): top-k -> top-p -> min-p ->
// temperature -> softmax -> inverse-CDF draw with the uniform number `u` from the host's
// random stream. Top-p and min-p see the temperature-1 distribution (llama.cpp's order).
// Writes the token id to out[out_index]; NONE when no logit is finite (the CPU's
// NoFiniteLogits). At most K = 128 candidates: one invocation walks them in order, as the
// CPU does (the sums must run in the same order to round the same way).

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

override WG: u32 = 1u;
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

@compute @workgroup_size(WG)
fn main() {
    var v: array<f32, K>;
    var e: array<f32, K>;
    let k = min(max(p.k, 1u), K);
    var n = 0u;
    while n < k && cand[p.src_offset + n].y != NONE {
        n += 1u;
    }
    // Sorted: the first is the maximum; -inf there means nothing is finite.
    if n == 0u || cand[p.src_offset].x == NEG_INF_KEY {
        out[p.out_index] = NONE;
        return;
    }
    if p.temperature <= 0.0 {
        out[p.out_index] = cand[p.src_offset].y;
        return;
    }
    for (var i = 0u; i < n; i++) {
        v[i] = logit(cand[p.src_offset + i].x);
    }
    let m = v[0];
    if p.top_p < 1.0 {
        var sum = 0.0;
        for (var i = 0u; i < n; i++) {
            e[i] = shifted_exp(v[i], m);
            sum += e[i];
        }
        let inv = 1.0 / sum;
        var cum = 0.0;
        var keep = n;
        for (var i = 0u; i < n; i++) {
            cum += e[i] * inv;
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
            if v[i] < threshold && i >= p.min_keep {
                keep = i;
                break;
            }
        }
        n = keep;
    }
    if n == 1u {
        out[p.out_index] = cand[p.src_offset].y;
        return;
    }
    if p.temperature != 1.0 {
        for (var i = 0u; i < n; i++) {
            if is_finite(v[i]) {
                v[i] = v[i] / p.temperature;
            }
        }
    }
    // Dividing by t > 0 keeps the order: v[0] is still the maximum.
    let m2 = v[0];
    var sum = 0.0;
    for (var i = 0u; i < n; i++) {
        e[i] = shifted_exp(v[i], m2);
        sum += e[i];
    }
    let inv = 1.0 / sum;
    var total = 0.0;
    for (var i = 0u; i < n; i++) {
        e[i] *= inv;
        total += e[i];
    }
    let goal = p.u * total;
    var cum = 0.0;
    for (var i = 0u; i < n; i++) {
        cum += e[i];
        if cum > goal {
            out[p.out_index] = cand[p.src_offset + i].y;
            return;
        }
    }
    // Rounding left the sum short of the target: the last token that can be drawn.
    var last = 0u;
    for (var i = 0u; i < n; i++) {
        if e[i] > 0.0 {
            last = i;
        }
    }
    out[p.out_index] = cand[p.src_offset + last].y;
}
