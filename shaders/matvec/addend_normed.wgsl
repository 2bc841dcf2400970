// The addend of a norm input (matvec/x_norm.wgsl) through its own RMSNorm, as residual_norm's
// pre-norm computes it: a' = a / rms(a) * w_in (Gemma's post-attention and post-FFW norms,
// with the eps of the norm after the add: the fusion requires one eps for both). The scale
// 1 / rms(a) is one number needed before the first input, so every workgroup reduces it from
// a before its loop: the n_in / 4 vec4s spread over the workgroup, four loads in flight per
// invocation, then one workgroup sum (norm/reduce.wgsl). That reduction is the only wait
// before the weights stream; the loop reads a again (from cache).

@group(0) @binding(9) var<storage, read> w_in: array<vec4<f32>>;

// 1 / rms(a), the same in every invocation.
var<private> a_scale: f32;

fn addend_begin(tid: u32) {
    let a0 = p.x_offset >> 2u;
    let n4 = p.n_in >> 2u;
    let last = a0 + n4 - 1u;
    var acc = vec4<f32>(0.0);
    for (var k = tid; k < n4; k += 4u * WG) {
        // Four loads issued together; the ones past the end read the last vec4 and count 0.
        let ks = vec4<u32>(k, k + WG, k + 2u * WG, k + 3u * WG);
        let i = min(vec4<u32>(a0) + ks, vec4<u32>(last));
        let keep = ks < vec4<u32>(n4);
        let v0 = a[i.x];
        let v1 = select(vec4<f32>(0.0), a[i.y], keep.y);
        let v2 = select(vec4<f32>(0.0), a[i.z], keep.z);
        let v3 = select(vec4<f32>(0.0), a[i.w], keep.w);
        acc += v0 * v0 + v1 * v1 + v2 * v2 + v3 * v3;
    }
    a_scale = inv_rms(workgroup_sum(acc.x + acc.y + acc.z + acc.w, tid));
}

// a'[4 k .. 4 k + 4] (k: a's vec4 index; j: the gains' index of the same inputs), in the
// reference's order (a * s) * w_in.
fn addend4(k: u32, j: u32) -> vec4<f32> {
    return a[k] * a_scale * w_in[j];
}
