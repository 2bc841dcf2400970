// Matvec input: the norm after a residual op that its addend's product did row by row
// (matvec/out_residual.wgsl), x = z / rms(h'), from z = h' * w_out as that product stored it
// and rms(h') = sqrt(sum(partials) / n_in + eps) from its workgroups' partial sums of h'^2
// (h_out_offset of them, from word h_offset of `partials`). `x4` reads z as x_plain.wgsl
// reads a vector of whole units (n_in a multiple of 32, z at a multiple of 4 floats: checked
// by the Rust side); the scale multiplies the row totals (`x_scale`), as the norm input's
// does (matvec/x_norm.wgsl). Each invocation loads up to 4 partial sums before the weights'
// loop, which does not wait for them; the workgroup adds them up after it.

@group(0) @binding(2) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(6) var<storage, read> partials: array<f32>;

// This invocation's partial sums tid, tid + WG, tid + 2 WG, tid + 3 WG (clamped to the
// last: `x_scale` drops those past the count). Nothing reads them before the loop ends, so
// the loop does not wait for them.
var<private> part: vec4<f32>;

fn part_index(tid: u32) -> vec4<u32> {
    return vec4<u32>(tid, tid + WG, tid + 2u * WG, tid + 3u * WG);
}

fn x_begin(row0: u32, tid: u32) {
    let j = min(part_index(tid), vec4<u32>(p.h_out_offset - 1u)) + p.h_offset;
    part = vec4<f32>(partials[j.x], partials[j.y], partials[j.z], partials[j.w]);
}

fn x4(i: u32) -> vec4<f32> {
    return x[i >> 2u];
}

// 1 / rms(h'). Called by every invocation (it sums across the workgroup).
fn x_scale(tid: u32) -> f32 {
    let v = select(vec4<f32>(0.0), part, part_index(tid) < vec4<u32>(p.h_out_offset));
    var s = (v.x + v.y) + (v.z + v.w);
    // Past 4 WG partial sums (none of the models here), the rest one by one.
    for (var k = tid + 4u * WG; k < p.h_out_offset; k += WG) {
        s += partials[p.h_offset + k];
    }
    let total = workgroup_sum(s, tid);
    return 1.0 / sqrt(total / f32(p.n_in) + p.eps);
}
