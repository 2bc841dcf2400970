// Matvec input through a residual add and an RMSNorm, computed as it is read (a decode step's
// `residual_norm` folded into the product that reads its output: one dispatch instead of
// two):
//   h' = h + a'                 stored at h_out_offset of `out` by the dispatch's first
//                               workgroup, as it reads them;
//   x  = h' / rms(h') * w_out   the product's input, with rms(v) = sqrt(mean(v^2) + eps);
// a at x_offset, h at h_offset; a, h and `out` are distinct buffers (wgpu forbids read +
// read-write of one). a' is `addend4`, from the addend file: matvec/addend_plain.wgsl (a
// itself: Llama's block) or matvec/addend_normed.wgsl (a / rms(a) * w_in: Gemma's post-norm,
// whose one scale every workgroup reduces from a before its loop, `addend_begin`). The
// scale 1 / rms(h') is one number for the whole vector, so the loop
// multiplies by h' * w_out and the row totals are scaled at the end (`x_scale`): the sum of
// squares is gathered from the inputs each invocation reads (every workgroup reads each input
// X_READS times: once for its R rows together, or once per row through rows_each.wgsl). Nothing waits for a
// norm before the weights stream: computing x into workgroup memory first (every workgroup
// reading the vectors at once) is slower than the dispatch the fold saves (docs/PERF.md,
// X-norm-fold-staged). The first workgroup also stores x itself at x_out_offset of `out`, in
// the reference's order of operations (h' * r * w_out), for other products reading it.
// Rows of whole units of 32 (n_in a multiple of 32, checked by the Rust side): x4 never
// reads past n_in.

@group(0) @binding(2) var<storage, read> a: array<vec4<f32>>;
@group(0) @binding(6) var<storage, read> h: array<vec4<f32>>;
@group(0) @binding(7) var<storage, read> w_out: array<vec4<f32>>;
@group(0) @binding(8) var<storage, read_write> out: array<vec4<f32>>;

// How many times the dot file reads each input of a slice (set from Rust: 4 for
// matvec/rows_each.wgsl, 1 for a format's own `rows_dot4`). A power of two: dividing by it
// is exact.
override X_READS: f32 = 1.0;

// This invocation's share of X_READS * sum(h'^2) (every quad reads the whole input; quad
// 0's shares are the ones summed).
var<private> ss: f32;
// The dispatch's first quad: stores h' as it reads it.
var<private> first: bool;
// The dispatch's first workgroup: stores x.
var<private> first_group: bool;

fn x_begin(row0: u32, tid: u32) {
    ss = 0.0;
    first = row0 == 0u;
    first_group = row0 < R * QUADS;
    addend_begin(tid);
}

// x[i .. i + 4] before the scale: h'[i ..] * w_out[i ..] (i counted from a's buffer start,
// as the dot files count it).
fn x4(i: u32) -> vec4<f32> {
    let j = (i - p.x_offset) >> 2u;
    let hv = h[(p.h_offset >> 2u) + j] + addend4(i >> 2u, j);
    if first {
        out[(p.h_out_offset >> 2u) + j] = hv;
    }
    ss += dot(hv, hv);
    return hv * w_out[j];
}

fn inv_rms(total: f32) -> f32 {
    return 1.0 / sqrt(total / f32(p.n_in) + p.eps);
}

// The factor of every row total: 1 / rms(h'). Called by every invocation (it reduces the sum
// of squares across the workgroup); the first workgroup stores x as well.
fn x_scale(tid: u32) -> f32 {
    let r = inv_rms(workgroup_sum(select(0.0, ss, quad == 0u), tid) / X_READS);
    if first_group {
        let a0 = p.x_offset >> 2u;
        let h0 = p.h_offset >> 2u;
        let x0 = p.x_out_offset >> 2u;
        for (var j = tid; j < p.n_in / 4u; j += WG) {
            out[x0 + j] = (h[h0 + j] + addend4(a0 + j, j)) * r * w_out[j];
        }
    }
    return r;
}
