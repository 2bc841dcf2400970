// Matvec input through a residual add and an RMSNorm, computed by every workgroup into
// workgroup memory before the product's loop (the decode step's `residual_norm` folded into
// the product that reads its output: one dispatch instead of two):
//   a' = a / rms(a) * w_in      when p.pre == 1 (Gemma's post-norm of a block's output),
//   a' = a                      when p.pre == 0 (Llama, Qwen);
//   h' = h + a'                 stored at h_out_offset of `out` by the dispatch's first
//                               workgroup;
//   x  = h' / rms(h') * w_out   the product's input, in `xs`, and stored at x_out_offset of
//                               `out` by the same workgroup (for other products reading x);
// with rms(v) = sqrt(mean(v^2) + eps), as norm/residual_norm.wgsl computes them (its order
// of operations per element; the sums go in another order). a starts at x_offset, h at
// h_offset; a, h and `out` are distinct buffers (wgpu forbids read + read-write of one). Every workgroup derives the same two scales with the same instructions,
// so all rows see one x.
//
// Each workgroup reads a, h and the gains whole (n_in <= 4 * XS_VEC4 floats, a multiple of 4,
// checked by the Rust side): the lowering folds the norm only where that extra traffic is
// small next to the dispatch it saves (`crates/model/src/gpu/fuse.rs`).

@group(0) @binding(2) var<storage, read> a: array<vec4<f32>>;
@group(0) @binding(6) var<storage, read> h: array<vec4<f32>>;
// Not read when p.pre == 0 (the op then binds w_out here as well).
@group(0) @binding(7) var<storage, read> w_in: array<vec4<f32>>;
@group(0) @binding(8) var<storage, read> w_out: array<vec4<f32>>;
@group(0) @binding(9) var<storage, read_write> out: array<vec4<f32>>;

// The most vec4s of input (`NORM_MAX_IN / 4` in ops/matvec/mod.rs): 8 KiB, which with the
// reduction's 4 KiB and norm/reduce.wgsl's 1 KiB stays inside WebGPU's 16 KiB minimum.
const XS_VEC4: u32 = 512u;
var<workgroup> xs: array<vec4<f32>, XS_VEC4>;

fn inv_rms(ss: f32) -> f32 {
    return 1.0 / sqrt(ss / f32(p.n_in) + p.eps);
}

// Fills xs with x, zeros past n_in up to the row's last unit of 32 (what the dot files may
// read). Invocation tid takes the vec4s tid, tid + WG, .. in every pass, so each pass reads
// back only what the same invocation wrote; the barrier at the end publishes xs to all.
fn x_begin(row0: u32, tid: u32) {
    let n4 = p.n_in / 4u;
    let end4 = (p.n_in + 31u) / 32u * 8u;
    let a0 = p.x_offset / 4u;
    let h0 = p.h_offset / 4u;
    var ss = 0.0;
    for (var j = tid; j < end4; j += WG) {
        var v = vec4<f32>(0.0);
        if j < n4 {
            v = a[a0 + j];
        }
        xs[j] = v;
        ss += dot(v, v);
    }
    var r_a = 1.0;
    if p.pre == 1u {
        r_a = inv_rms(workgroup_sum(ss, tid));
    }
    let store = row0 == 0u;
    let o0 = p.h_out_offset / 4u;
    ss = 0.0;
    for (var j = tid; j < n4; j += WG) {
        var d = xs[j];
        if p.pre == 1u {
            d = d * r_a * w_in[j];
        }
        let hv = h[h0 + j] + d;
        if store {
            out[o0 + j] = hv;
        }
        xs[j] = hv;
        ss += dot(hv, hv);
    }
    let r_h = inv_rms(workgroup_sum(ss, tid));
    let x0 = p.x_out_offset / 4u;
    for (var j = tid; j < n4; j += WG) {
        let x = xs[j] * r_h * w_out[j];
        xs[j] = x;
        if store {
            out[x0 + j] = x;
        }
    }
    workgroupBarrier();
}

// x[i .. i + 4] (i counted from a's buffer start, as the dot files count it).
fn x4(i: u32) -> vec4<f32> {
    return xs[(i - p.x_offset) >> 2u];
}
