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
// registers (loaded once for 16 tokens) and computes y[t, j] for tokens t = 16 f .. 16 f + 15
// of the block, whose a rows are staged as [token][16] vec4s: 16 FMAs an output, a
// subgroup's stores 32 consecutive floats of a token's row, four outputs' loads
// (accumulating) issued together.
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

// The loads below clamp their index and select 0 outside instead of branching around the
// load: branch-free, a block's loads issue together (thin_sum 10-15% faster on the H200,
// docs/PERF.md D-thin-select).
fn w_at(j: u32, k: u32) -> f32 {
    let v = w[p.w_offset + min(j, p.n_out - 1u) * p.w_row + min(k, p.n_in - 1u) * p.w_col];
    return select(0.0, v, j < p.n_out && k < p.n_in);
}

fn a_at(t: u32, k: u32) -> f32 {
    let v = a[p.a_offset + min(t, p.n_tokens - 1u) * p.a_stride + min(k, p.n_in - 1u)];
    return select(0.0, v, t < p.n_tokens && k < p.n_in);
}

// What output (t, j) holds where the product accumulates, else 0 (0 outside y too). The
// accumulate test is uniform (a parameter), so a product that overwrites y never reads it.
fn held(t: u32, j: u32) -> f32 {
    if p.accumulate == 0u {
        return 0.0;
    }
    let v = y[p.y_offset + min(t, p.n_tokens - 1u) * p.y_stride + min(j, p.n_out - 1u)];
    return select(0.0, v, t < p.n_tokens && j < p.n_out);
}

// Stores one output (inside y).
fn store(t: u32, j: u32, v: f32) {
    if t < p.n_tokens && j < p.n_out {
        y[p.y_offset + t * p.y_stride + j] = v;
    }
}

// Stores or adds one output.
fn put(t: u32, j: u32, v: f32) {
    store(t, j, held(t, j) + v);
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
        // The chunk: invocation tid stages index k = k0 + tid of each of the block's tokens and
        // w(0..15, k), every load issued before any store (a store waits for its load: one
        // after the other, each load's latency would be paid in turn).
        let k = k0 + tid;
        let x0 = a_at(t0 + 0u, k);
        let x1 = a_at(t0 + 1u, k);
        let x2 = a_at(t0 + 2u, k);
        let x3 = a_at(t0 + 3u, k);
        let x4 = a_at(t0 + 4u, k);
        let x5 = a_at(t0 + 5u, k);
        let x6 = a_at(t0 + 6u, k);
        let x7 = a_at(t0 + 7u, k);
        let x8 = a_at(t0 + 8u, k);
        let x9 = a_at(t0 + 9u, k);
        let x10 = a_at(t0 + 10u, k);
        let x11 = a_at(t0 + 11u, k);
        let x12 = a_at(t0 + 12u, k);
        let x13 = a_at(t0 + 13u, k);
        let x14 = a_at(t0 + 14u, k);
        let x15 = a_at(t0 + 15u, k);
        let w0 = w_at(0u, k);
        let w1 = w_at(1u, k);
        let w2 = w_at(2u, k);
        let w3 = w_at(3u, k);
        let w4 = w_at(4u, k);
        let w5 = w_at(5u, k);
        let w6 = w_at(6u, k);
        let w7 = w_at(7u, k);
        let w8 = w_at(8u, k);
        let w9 = w_at(9u, k);
        let w10 = w_at(10u, k);
        let w11 = w_at(11u, k);
        let w12 = w_at(12u, k);
        let w13 = w_at(13u, k);
        let w14 = w_at(14u, k);
        let w15 = w_at(15u, k);
        at[0u * AS + tid] = x0;
        at[1u * AS + tid] = x1;
        at[2u * AS + tid] = x2;
        at[3u * AS + tid] = x3;
        at[4u * AS + tid] = x4;
        at[5u * AS + tid] = x5;
        at[6u * AS + tid] = x6;
        at[7u * AS + tid] = x7;
        at[8u * AS + tid] = x8;
        at[9u * AS + tid] = x9;
        at[10u * AS + tid] = x10;
        at[11u * AS + tid] = x11;
        at[12u * AS + tid] = x12;
        at[13u * AS + tid] = x13;
        at[14u * AS + tid] = x14;
        at[15u * AS + tid] = x15;
        rows[4u * tid + 0u] = vec4<f32>(w0, w1, w2, w3);
        rows[4u * tid + 1u] = vec4<f32>(w4, w5, w6, w7);
        rows[4u * tid + 2u] = vec4<f32>(w8, w9, w10, w11);
        rows[4u * tid + 3u] = vec4<f32>(w12, w13, w14, w15);
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
    // The block's a rows: invocation tid stages the 4 values k = 4 (tid % 4) .. + 3 of token
    // tid / 4 (TB * 4 = WG vec4s).
    let q = tid % 4u;
    let r = tid / 4u;
    let v0 = a_at(t0 + r, 4u * q);
    let v1 = a_at(t0 + r, 4u * q + 1u);
    let v2 = a_at(t0 + r, 4u * q + 2u);
    let v3 = a_at(t0 + r, 4u * q + 3u);
    let w0 = vec4<f32>(w_at(j, 0u), w_at(j, 1u), w_at(j, 2u), w_at(j, 3u));
    let w1 = vec4<f32>(w_at(j, 4u), w_at(j, 5u), w_at(j, 6u), w_at(j, 7u));
    let w2 = vec4<f32>(w_at(j, 8u), w_at(j, 9u), w_at(j, 10u), w_at(j, 11u));
    let w3 = vec4<f32>(w_at(j, 12u), w_at(j, 13u), w_at(j, 14u), w_at(j, 15u));
    rows[tid] = vec4<f32>(v0, v1, v2, v3);
    workgroupBarrier();
    // Tokens 16 f .. 16 f + 15 of the block, four at a time: the four sums first, then
    // (accumulating) the four loads of what y holds, then the stores.
    for (var g = 0u; g < 4u; g++) {
        let k = 16u * f + 4u * g;
        let s0 = row_dot(k, w0, w1, w2, w3);
        let s1 = row_dot(k + 1u, w0, w1, w2, w3);
        let s2 = row_dot(k + 2u, w0, w1, w2, w3);
        let s3 = row_dot(k + 3u, w0, w1, w2, w3);
        let t = t0 + k;
        let h = vec4<f32>(held(t, j), held(t + 1u, j), held(t + 2u, j), held(t + 3u, j));
        store(t, j, h.x + s0);
        store(t + 1u, j, h.y + s1);
        store(t + 2u, j, h.z + s2);
        store(t + 3u, j, h.w + s3);
    }
}

// sum_k a[k, ..] w(j, k) for the block's token k (its staged row).
fn row_dot(k: u32, w0: vec4<f32>, w1: vec4<f32>, w2: vec4<f32>, w3: vec4<f32>) -> f32 {
    var s = dot(rows[4u * k], w0);
    s += dot(rows[4u * k + 1u], w1);
    s += dot(rows[4u * k + 2u], w2);
    s += dot(rows[4u * k + 3u], w3);
    return s;
}
