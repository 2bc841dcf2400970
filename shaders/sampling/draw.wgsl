// The draw over the best K candidates (the last selection level's sorted block, through
// `candidate(i)` of sampling/level_draw.wgsl, which also defines `store_token`), with the CPU
// sampler's chain and arithmetic (`crates/model/src/sampler/`): top-k -> top-p -> min-p ->
// temperature -> softmax -> inverse-CDF draw with the uniform number `u` from the host's
// random stream. Top-p and min-p see the temperature-1 distribution (llama.cpp's order).
// Stores the token id (`store_token`); NONE when no logit is finite (the CPU's
// NoFiniteLogits). At most K = 64 candidates (topk.wgsl's K): one invocation walks them in
// order, as the CPU does (the sums must run in the same order to round the same way), over
// values the workgroup first computes at once into workgroup memory, one candidate an
// invocation (its logit and exponentials: the same expressions as the CPU's, so the same
// values): one invocation doing all of it, its arrays in local memory, is slower
// (docs/PERF.md, D-sort-registers). The draw runs in the last level's workgroup rather than
// as a dispatch of its own reading the stored candidates back: one dispatch fewer a step
// (D-draw-in-level).

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

// Every candidate's values, one invocation a candidate (the workgroup's WG invocations in
// turn); the caller then waits at a barrier.
fn draw_values(tid: u32) {
    let m = logit(candidate(0u).x);
    for (var i = tid; i < K; i += WG) {
        let c = candidate(i);
        let l = logit(c.x);
        cs[i] = c;
        ls[i] = l;
        e1[i] = shifted_exp(l, m);
        e2[i] = shifted_exp(tempered(l), tempered(m));
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
        store_token(NONE);
        return;
    }
    if p.temperature <= 0.0 {
        store_token(cs[0].y);
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
        store_token(cs[0].y);
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
            store_token(cs[i].y);
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
    store_token(cs[last].y);
}
