// Products with a side of at most 16 (a LoRA rank), in f32: y[t, j] (+)= sum_k a[t, k] w(j, k)
// over n_tokens tokens, j < n_out, k < n_in, where a[t, k] is a[a_offset + t * a_stride + k],
// w(j, k) is w[w_offset + j * w_row + k * w_col] (w_row = n_in, w_col = 1 for a weight stored
// as GGUF rows, W; w_row = 1, w_col = n_out for its transpose) and y[t, j] is
// y[y_offset + t * y_stride + j], added to (`accumulate`) or overwritten. LoRA's four products
// are of this kind: forward x A^T (16 outputs) and h B^T (16 summed), backward dy B (16
// outputs) and dh A (16 summed). Their bytes bound them (each reads or writes its wide side
// once, 2 x 16 FLOPs a value), so the kernels stream the wide side and keep the thin one in
// registers or workgroup memory, where 64 x 64 tiles on the tensor cores were three quarters
// empty and walked the wide side in one 16-deep step.
//
// `thin_out` (n_out <= 16): workgroup (token block) of 256 takes TT = 16 tokens, invocation
// (t, f) = (tid % 16, tid / 16) token t and the summed indices 16 f .. 16 f + 15 of each
// chunk of KC = 256: the chunk's a rows are staged through workgroup memory (one subgroup
// load: 32 consecutive floats of a token's row) and the chunk's w as [k][16] vec4s; the
// invocation's 16 outputs are 4 named vec4 accumulators; at the end the 16 phases are added
// in order.
// `thin_sum` (n_in <= 16): workgroup (column block, token block) of 256 takes 64 outputs j of
// TB = 64 tokens: invocation (c, f) = (tid % 64, tid / 64) holds w(j, 0..15) in 4 vec4
// registers and computes y[t, j] for tokens t = 4 m + f (m < 16) of the block, whose a rows
// are staged as [token][16] vec4s: 16 FMAs an output, a subgroup's stores 32 consecutive
// floats of a token's row.
// Each output sums its products in a fixed order, one rounding a term.

struct Params {
    n_tokens: u32,
    n_in: u32,
    n_out: u32,
    a_offset: u32,
    a_stride: u32,
    w_offset: u32,
    w_row: u32,
    w_col: u32,
    y_offset: u32,
    y_stride: u32,
    accumulate: u32,
    _pad0: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> a: array<f32>;
@group(0) @binding(2) var<storage, read> w: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;

// Must be 256.
override WG: u32 = 256u;
// The widest thin side.
const R: u32 = 16u;
// thin_out: tokens a workgroup, summed indices a chunk and their row stride in `at` (odd: a
// column of 16 tokens' values lies in 16 banks).
const TT: u32 = 16u;
const KC: u32 = 256u;
const AS: u32 = 257u;
// thin_sum: outputs and tokens a workgroup.
const TJ: u32 = 64u;
const TB: u32 = 64u;

var<workgroup> at: array<f32, 4112>; // TT * AS
// thin_out: the chunk's w(0..15, k) at 4 k .. 4 k + 3, and at the end each invocation's
// sums (invocation i at 4 i .. 4 i + 3); thin_sum: token k's a row at 4 k .. 4 k + 3.
var<workgroup> rows: array<vec4<f32>, 1024>; // KC * R / 4 = WG * R / 4

var<private> c0: vec4<f32>;
var<private> c1: vec4<f32>;
var<private> c2: vec4<f32>;
var<private> c3: vec4<f32>;

fn w_at(j: u32, k: u32) -> f32 {
    if j >= p.n_out || k >= p.n_in {
        return 0.0;
    }
    return w[p.w_offset + j * p.w_row + k * p.w_col];
}

fn a_at(t: u32, k: u32) -> f32 {
    if t >= p.n_tokens || k >= p.n_in {
        return 0.0;
    }
    return a[p.a_offset + t * p.a_stride + k];
}

// Stores or adds one output.
fn put(t: u32, j: u32, v: f32) {
    if t < p.n_tokens && j < p.n_out {
        let i = p.y_offset + t * p.y_stride + j;
        var s = v;
        if p.accumulate != 0u {
            s = y[i] + v;
        }
        y[i] = s;
    }
}

@compute @workgroup_size(WG)
fn thin_out(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(local_invocation_index) tid: u32,
) {
    let t0 = wid.x * TT;
    let t = tid % TT;
    let f = tid / TT;
    for (var k0 = 0u; k0 < p.n_in; k0 += KC) {
        // The chunk: invocation tid stages index k0 + tid of each of the block's tokens and
        // w(0..15, k0 + tid).
        for (var r = 0u; r < TT; r++) {
            at[r * AS + tid] = a_at(t0 + r, k0 + tid);
        }
        rows[4u * tid] = vec4<f32>(w_at(0u, k0 + tid), w_at(1u, k0 + tid), w_at(2u, k0 + tid), w_at(3u, k0 + tid));
        rows[4u * tid + 1u] = vec4<f32>(w_at(4u, k0 + tid), w_at(5u, k0 + tid), w_at(6u, k0 + tid), w_at(7u, k0 + tid));
        rows[4u * tid + 2u] = vec4<f32>(w_at(8u, k0 + tid), w_at(9u, k0 + tid), w_at(10u, k0 + tid), w_at(11u, k0 + tid));
        rows[4u * tid + 3u] = vec4<f32>(w_at(12u, k0 + tid), w_at(13u, k0 + tid), w_at(14u, k0 + tid), w_at(15u, k0 + tid));
        workgroupBarrier();
        for (var kk = 0u; kk < R; kk++) {
            let k = R * f + kk;
            let v = vec4<f32>(at[t * AS + k]);
            c0 = fma(v, rows[4u * k], c0);
            c1 = fma(v, rows[4u * k + 1u], c1);
            c2 = fma(v, rows[4u * k + 2u], c2);
            c3 = fma(v, rows[4u * k + 3u], c3);
        }
        workgroupBarrier();
    }
    // The loop's last barrier passed: rows is free for the sums.
    rows[4u * tid] = c0;
    rows[4u * tid + 1u] = c1;
    rows[4u * tid + 2u] = c2;
    rows[4u * tid + 3u] = c3;
    workgroupBarrier();
    // Output (token tid % 16, j = tid / 16): the phases in order.
    let j = tid / TT;
    var s = 0.0;
    for (var g = 0u; g < WG / TT; g++) {
        s += rows[4u * (g * TT + t) + j / 4u][j % 4u];
    }
    put(t0 + t, j, s);
}

@compute @workgroup_size(WG)
fn thin_sum(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(local_invocation_index) tid: u32,
) {
    let j = wid.x * TJ + tid % TJ;
    let f = tid / TJ;
    let t0 = wid.y * TB;
    let w0 = vec4<f32>(w_at(j, 0u), w_at(j, 1u), w_at(j, 2u), w_at(j, 3u));
    let w1 = vec4<f32>(w_at(j, 4u), w_at(j, 5u), w_at(j, 6u), w_at(j, 7u));
    let w2 = vec4<f32>(w_at(j, 8u), w_at(j, 9u), w_at(j, 10u), w_at(j, 11u));
    let w3 = vec4<f32>(w_at(j, 12u), w_at(j, 13u), w_at(j, 14u), w_at(j, 15u));
    // The block's a rows: invocation tid stages the 4 values k = 4 (tid % 4) .. + 3 of tokens
    // tid / 4 and tid / 4 + 64 ... (TB * 4 vec4s in all, one each).
    let q = tid % 4u;
    let r = tid / 4u;
    rows[tid] = vec4<f32>(a_at(t0 + r, 4u * q), a_at(t0 + r, 4u * q + 1u), a_at(t0 + r, 4u * q + 2u), a_at(t0 + r, 4u * q + 3u));
    workgroupBarrier();
    for (var m = 0u; m < TB / 4u; m++) {
        let k = 4u * m + f;
        var s = dot(rows[4u * k], w0);
        s += dot(rows[4u * k + 1u], w1);
        s += dot(rows[4u * k + 2u], w2);
        s += dot(rows[4u * k + 3u], w3);
        put(t0 + k, j, s);
    }
}
