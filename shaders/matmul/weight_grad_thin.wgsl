// The weight gradient of matmul/weight_grad.wgsl (its Params, bindings, splits over the
// grid's z and accumulate, prepended) where one side of dW is at most 16 wide: a LoRA rank,
// A's rows (entry `thin_rows`, n_out <= 16) or B's inputs (entry `thin_inputs`, n_in <= 16).
// Such a product reads T x n values of its wide side and T x r of its thin one for 2 T n r
// FLOPs: it is bound by reading the wide side once, which 64 x 64 tiles of dW (three quarters
// of them past a rank of 16) do not reach.
//
// Call the wide side W (x for thin_rows, dy for thin_inputs: n_wide values a token) and the
// thin side S (dy for thin_rows, x for thin_inputs: r <= 16 values a token). Workgroup
// (column group, -, split) of 256 takes wide columns 32 g .. 32 g + 31 over the split's
// tokens, BT = 64 at a time: the block's S rows are staged in workgroup memory (16 values a
// token, zeros past r); invocation (c, f) = (tid % 32, tid / 32) reads W[t, 32 g + c] for
// the block's tokens t = 8 m + f (m < 8; a subgroup reads 32 consecutive floats of one token)
// and adds W[t, j] S[t, k] into its 16 accumulators (4 vec4: k = 4 q + component). At the
// end the 8 phases' sums of a column are added in phase order through workgroup memory, and
// dW[k, j] (thin_rows: dw[k * n_in + j]) or dW[j, k] (thin_inputs: dw[j * n_in + k]) stored.
// Each output sums its products in a fixed order (within a phase by token, then the phases),
// one rounding a term as the tiles' kernel.

// Must be 256 (COLS x PHASES).
override WG: u32 = 256u;
const COLS: u32 = 32u;
const PHASES: u32 = 8u;
const BT: u32 = 64u;
// The widest thin side.
const R: u32 = 16u;

// The block's thin rows: token k of the block at vec4s 4 k .. 4 k + 3.
var<workgroup> thin: array<vec4<f32>, 256>; // BT * R / 4
// Each invocation's accumulators at the end (invocation i at vec4s 4 i .. 4 i + 3).
var<workgroup> sums: array<vec4<f32>, 1024>; // WG * R / 4

var<private> a0: vec4<f32>;
var<private> a1: vec4<f32>;
var<private> a2: vec4<f32>;
var<private> a3: vec4<f32>;

// Adds w times the block's thin row of token k to the accumulators.
fn add_row(w: f32, k: u32) {
    let v = vec4<f32>(w);
    a0 = fma(v, thin[4u * k], a0);
    a1 = fma(v, thin[4u * k + 1u], a1);
    a2 = fma(v, thin[4u * k + 2u], a2);
    a3 = fma(v, thin[4u * k + 3u], a3);
}

// The split's tokens [x, y).
fn split_tokens(z: u32) -> vec2<u32> {
    let begin = min(z * p.tokens_per_split, p.n_tokens);
    return vec2<u32>(begin, min(begin + p.tokens_per_split, p.n_tokens));
}

// Stages the thin rows of tokens tb .. tb + BT (within `end`): S[t, k] is
// buf[off + t * stride + k] for k < r; invocation tid writes values tid + 256 e (e < 4).
fn stage_thin(from_dy: bool, tb: u32, end: u32, r: u32, tid: u32) {
    // The four loads first, then the stores (a store waits for its load).
    let v0 = thin_at(from_dy, tb, end, r, tid);
    let v1 = thin_at(from_dy, tb, end, r, tid + WG);
    let v2 = thin_at(from_dy, tb, end, r, tid + 2u * WG);
    let v3 = thin_at(from_dy, tb, end, r, tid + 3u * WG);
    thin[tid / 4u][tid % 4u] = v0;
    thin[(tid + WG) / 4u][tid % 4u] = v1;
    thin[(tid + 2u * WG) / 4u][tid % 4u] = v2;
    thin[(tid + 3u * WG) / 4u][tid % 4u] = v3;
}

// Value i of the block's thin rows (token tb + i / R, index i % R), 0 past the split or r.
fn thin_at(from_dy: bool, tb: u32, end: u32, r: u32, i: u32) -> f32 {
    let k = i % R;
    let t = tb + i / R;
    if t >= end || k >= r {
        return 0.0;
    }
    if from_dy {
        return dy[p.dy_offset + t * p.dy_stride + k];
    }
    return x[p.x_offset + t * p.x_stride + k];
}

// W[t, j] (0 past the split's tokens or the wide side).
fn wide(from_dy: bool, t: u32, end: u32, j: u32, n_wide: u32) -> f32 {
    if t >= end || j >= n_wide {
        return 0.0;
    }
    if from_dy {
        return dy[p.dy_offset + t * p.dy_stride + j];
    }
    return x[p.x_offset + t * p.x_stride + j];
}

// The accumulators over the split's tokens: the whole workgroup walks the blocks (uniform
// bounds), each invocation its column j and phase f.
fn accumulate_split(thin_rows: bool, z: u32, j: u32, f: u32, tid: u32) {
    let span = split_tokens(z);
    let r = select(p.n_in, p.n_out, thin_rows);
    let n_wide = select(p.n_out, p.n_in, thin_rows);
    for (var tb = span.x; tb < span.y; tb += BT) {
        stage_thin(thin_rows, tb, span.y, r, tid);
        workgroupBarrier();
        // Eight loads first, then their products: the loads in flight together.
        let w0 = wide(!thin_rows, tb + f, span.y, j, n_wide);
        let w1 = wide(!thin_rows, tb + f + 8u, span.y, j, n_wide);
        let w2 = wide(!thin_rows, tb + f + 16u, span.y, j, n_wide);
        let w3 = wide(!thin_rows, tb + f + 24u, span.y, j, n_wide);
        let w4 = wide(!thin_rows, tb + f + 32u, span.y, j, n_wide);
        let w5 = wide(!thin_rows, tb + f + 40u, span.y, j, n_wide);
        let w6 = wide(!thin_rows, tb + f + 48u, span.y, j, n_wide);
        let w7 = wide(!thin_rows, tb + f + 56u, span.y, j, n_wide);
        add_row(w0, f);
        add_row(w1, f + 8u);
        add_row(w2, f + 16u);
        add_row(w3, f + 24u);
        add_row(w4, f + 32u);
        add_row(w5, f + 40u);
        add_row(w6, f + 48u);
        add_row(w7, f + 56u);
        workgroupBarrier();
    }
}

// The phases' sums added and stored: invocation tid stores outputs (k, c) for k = tid / 32
// and tid / 32 + 8 of column c = tid % 32.
fn store_split(thin_rows: bool, z: u32, g: u32, tid: u32) {
    sums[4u * tid] = a0;
    sums[4u * tid + 1u] = a1;
    sums[4u * tid + 2u] = a2;
    sums[4u * tid + 3u] = a3;
    workgroupBarrier();
    let r = select(p.n_in, p.n_out, thin_rows);
    let n_wide = select(p.n_out, p.n_in, thin_rows);
    let c = tid % COLS;
    let j = g * COLS + c;
    for (var h = 0u; h < 2u; h++) {
        let k = tid / COLS + 8u * h;
        var s = 0.0;
        for (var f = 0u; f < PHASES; f++) {
            s += sums[4u * (f * COLS + c) + k / 4u][k % 4u];
        }
        if k < r && j < n_wide {
            var at = p.dw_offset + z * p.split_stride;
            if thin_rows {
                at += k * p.n_in + j;
            } else {
                at += j * p.n_in + k;
            }
            if p.accumulate != 0u {
                s = dw[at] + s;
            }
            dw[at] = s;
        }
    }
}

@compute @workgroup_size(WG)
fn thin_rows(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(local_invocation_index) tid: u32,
) {
    let j = wid.x * COLS + tid % COLS;
    accumulate_split(true, wid.z, j, tid / COLS, tid);
    store_split(true, wid.z, wid.x, tid);
}

@compute @workgroup_size(WG)
fn thin_inputs(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(local_invocation_index) tid: u32,
) {
    let j = wid.x * COLS + tid % COLS;
    accumulate_split(false, wid.z, j, tid / COLS, tid);
    store_split(false, wid.z, wid.x, tid);
}
