// Matvec input: the norm after a residual op that its addend's product did row by row
// (matvec/out_residual.wgsl), x = z / rms(h'), from z = h' * w_out as that product stored it
// and rms(h') = sqrt(sum(partials) / n_in + eps) from its workgroups' partial sums of h'^2
// (h_out_offset of them, from word h_offset of `partials`). `x4` reads z as x_plain.wgsl
// reads a vector of whole units (n_in a multiple of 32, z at a multiple of 4 floats: checked
// by the Rust side); the scale multiplies the row totals (`x_scale`), as the norm input's
// does (matvec/x_norm.wgsl).
//
// Who adds the partial sums comes from the sum file: every subgroup on its own
// (matvec/scaled_sum_subgroup.wgsl: a subgroupAdd, no barrier) or the workgroup
// (matvec/scaled_sum_plain.wgsl: a tree through workgroup memory). Its `sum_lane(tid)` and
// `sum_stride()` say which partial sums an invocation takes: lane, lane + stride, ... Each
// invocation loads up to 8 of them before the weights' loop, which does not wait for them
// (loaded after it they cost more: docs/PERF.md, X-partial-sums-late), and they are added
// after it by each subgroup (a workgroup sum there cost qwen2.5-0.5b's gate|up 18.1 against
// 16.2 us: D-scaled-sum-subgroup).

@group(0) @binding(2) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(6) var<storage, read> partials: array<f32>;

// This invocation's partial sums (clamped to the last: `x_scale` drops those past the count;
// private variables start at zero).
var<private> part_lo: vec4<f32>;
var<private> part_hi: vec4<f32>;

// The indices of this invocation's first 8 partial sums.
fn part_index(k0: u32, tid: u32) -> vec4<u32> {
    let s = sum_stride();
    return sum_lane(tid) + vec4<u32>(k0, k0 + 1u, k0 + 2u, k0 + 3u) * s;
}

fn load_parts(k0: u32, tid: u32) -> vec4<f32> {
    let j = min(part_index(k0, tid), vec4<u32>(p.h_out_offset - 1u)) + p.h_offset;
    return vec4<f32>(partials[j.x], partials[j.y], partials[j.z], partials[j.w]);
}

fn live_parts(v: vec4<f32>, k0: u32, tid: u32) -> vec4<f32> {
    return select(vec4<f32>(0.0), v, part_index(k0, tid) < vec4<u32>(p.h_out_offset));
}

// The second 4 only where the count needs them (SmolLM2's 72 sums at 32 a subgroup do not:
// loading them anyway measured 1% slower there).
fn x_begin(row0: u32, tid: u32) {
    part_lo = load_parts(0u, tid);
    if 4u * sum_stride() < p.h_out_offset {
        part_hi = load_parts(4u, tid);
    }
}

fn x4(i: u32) -> vec4<f32> {
    return x[i >> 2u];
}

// 1 / rms(h'). Called by every invocation (the sum may take the workgroup).
fn x_scale(tid: u32) -> f32 {
    let v = live_parts(part_lo, 0u, tid) + live_parts(part_hi, 4u, tid);
    var s = (v.x + v.y) + (v.z + v.w);
    // Past 8 a lane (none of the models here), the rest one by one.
    for (var k = sum_lane(tid) + 8u * sum_stride(); k < p.h_out_offset; k += sum_stride()) {
        s += partials[p.h_offset + k];
    }
    let total = scaled_total(s, tid);
    return 1.0 / sqrt(total / f32(p.n_in) + p.eps);
}
