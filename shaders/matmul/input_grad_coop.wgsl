// The input gradient on the tensor cores: dX[t, i] (+)= sum_r dY[t, r] W[row0 + r, i], the
// contract of input_grad.wgsl (matmul/input_grad_params.wgsl: Params, bindings, the weight's
// staging). The cooperative-matrix types and ops (MatA, MatB, MatC, coop_lane, mma;
// load_a_cols, load_b, store_scratch) come from common/coop_ops.wgsl and matmul/coop_io.wgsl,
// or in the tests' emulation from common/coop_emul.wgsl and matmul/coop_io_emul.wgsl: A is the
// weight tile `ws` (inputs x rows: a weight row's inputs are consecutive, so column-major), B
// the dY tile `xs` (rows x tokens: a token's rows are consecutive, so column-major), C inputs x
// tokens.
//
// Workgroup (input tile, token tile) of WG = 2 TM invocations (TM / 16 subgroups of 32)
// computes TM inputs x TN tokens (ops/matmul_input_grad.rs, `InputGradTile`: 64 x 64 on 128
// invocations, 128 x 64 or 128 x 128 on 256), walking the weight's rows BR = 64 at a time (4
// products of 16 per barrier). The 128-input tiles read dY once per 128 inputs instead of 64
// (the LM head's dY, 262,144 f32 a token, is the bulk of what the kernel reads), and 128 x 128
// gives each subgroup 2 x 4 accumulators for 2 A and 4 B loads (64 x 64's 2 x 2 take 2 and 2).
// - `ws` holds the weights as decoded, `[step row][input]`: invocation i decodes unit
//   (TM / 32) wid.x + i % (TM / 32) (both halves, `decode_half` in f32, the quant crate's
//   arithmetic) of step row i / (TM / 32) (BR rows of TM / 32 units: one unit an invocation)
//   and stores its 32 weights, rounded to f16, as 8 vec4<f16> of 4 consecutive inputs.
//   Stored transposed (`[input][row]`, as A row-major) they would take 32 scalar f16 stores
//   at strided addresses, with bank conflicts; A is loaded column-major instead.
// - `xs` holds dY as `[token][row]`: invocation i reads rows 4 (i % 16) .. + 3 of the step
//   for tokens i / 16 + (WG / 16) m (m < TN * 16 / WG: 8, or 4 for 128 x 64), 4 consecutive
//   floats, and stores them as one vec4<f16>: a subgroup's loads cover 64 consecutive floats
//   of each of two tokens.
// - Software pipelining, as matmul_coop.wgsl's: both are rounded to f16 as they are loaded
//   and held in named registers (`Staged`: an array indexed in a loop was spilled,
//   D-named-registers), and step s + 1's global loads and decode are issued after step s's
//   stores and barrier, before its products, so their latency overlaps the tensor-core work
//   instead of stalling the staging between the barriers; the registers are stored to the
//   tiles at the top of the next step. Registers, not a second stage of tiles: in the
//   forward two stages halved the workgroups an SM holds and slowed the smaller products and
//   the prefill (docs/PERF.md, X-coop-two-stages).
// - `xs`'s rows (a token's BR rows) are RS = 18 vec4s (144 bytes) apart, as the forward's;
//   `ws`'s (a step row's TM inputs) WRS = TM / 4 + 2 (144 or 272 bytes): every row and every
//   16-value quarter starts 16-byte aligned, as Vulkan requires of a cooperative-matrix load,
//   and the 8 rows a load reads at once start in 8 distinct groups of 4 banks.
// - Subgroup s owns inputs 32 (s % (TM / 32)) .. + 31 and tokens 16 FT (s / (TM / 32)) ..
//   as 2 x FT accumulators of 16 x 16 in f32 (FT = TN / 32: two subgroups along the tokens).
// - Output: every accumulator through a 16 x 16 f32 scratch of its subgroup, then each
//   element inside dX stored (or added, `accumulate`) one by one.
// - Every invocation reaches every coop op in uniform control flow: loop bounds are uniform
//   and no branch encloses a coop op but those on override constants (the next step's loads
//   sit in a branch on the step alone, uniform, holding none).
// Workgroup memory at 128 x 128: 17 KB of weights, 18 KB of dY, 8 KB of scratch (the
// overrides' defaults are that tile's, so `cargo xtask wgsl` checks its 48 KB limit there).
// Precision: weights and dY rounded to f16 (one f16 ulp each), products exact in f32 and
// summed in f32 by the tensor cores (the bound: ops/matmul_input_grad.rs).

override WG: u32 = 256u;
// Inputs and tokens of a workgroup's tile; WG = 2 TM.
override TM: u32 = 128u;
override TN: u32 = 128u;
// A subgroup's 16-token accumulator blocks (along the inputs always 2).
override FT: u32 = TN / 32u;
// Units of 32 inputs in a tile row; subgroups along the inputs (32 inputs each).
override TU: u32 = TM / 32u;
override SG_I: u32 = TM / 32u;
// Weight rows per barrier.
const BR: u32 = 64u;
const RS: u32 = 18u;
override WRS: u32 = TM / 4u + 2u;
// dY quads an invocation stages a step: 8, or 4 (one `Staged`).
override ND: u32 = TN * (BR / 4u) / WG;
// Tokens between an invocation's staged dY quads.
override YT_STEP: u32 = WG / (BR / 4u);

override WS_LEN: u32 = BR * WRS;
override XS_LEN: u32 = TN * RS;
// One 16 x 16 accumulator per subgroup, column-major.
override CS_LEN: u32 = WG * 8u;
var<workgroup> ws: array<vec4<f16>, WS_LEN>;
var<workgroup> xs: array<vec4<f16>, XS_LEN>;
var<workgroup> cs: array<f32, CS_LEN>;

// Adds or stores accumulator `c` (inputs i0.., tokens t0..) into dX (split_at elements on:
// a split's slice) through the subgroup's scratch at cs[scratch..], keeping only elements
// inside dX. Called by every invocation in uniform control flow (it holds barriers).
fn store_partial(c: MatC, scratch: u32, lane: u32, i0: u32, t0: u32, split_at: u32) {
    store_scratch(c, scratch);
    workgroupBarrier();
    for (var e = 0u; e < 8u; e++) {
        let k = lane + 32u * e;
        let i = i0 + k % 16u;
        let t = t0 + k / 16u;
        if i < p.n_in && t < p.n_tokens {
            let at = p.dx_offset + split_at + t * p.dx_stride + i;
            var v = cs[scratch + k];
            if p.accumulate != 0u {
                v = y[at] + v;
            }
            y[at] = v;
        }
    }
    workgroupBarrier();
}

// 16 staged values as f16, in named fields rather than an array: a private array indexed in a
// loop may live in local memory (matmul_coop.wgsl's `Staged`; docs/PERF.md,
// D-named-registers).
struct Staged {
    c0: vec4<f16>,
    c1: vec4<f16>,
    c2: vec4<f16>,
    c3: vec4<f16>,
}

// Half dh (16 weights) of unit `uc` of step row `sr` in the step from row r0, zeros at rows
// from r_end and where `u_ok` is false (the row read clamped in bounds), rounded to f16.
fn stage_w(r0: u32, r_end: u32, sr: u32, uc: u32, u_ok: bool, dh: u32) -> Staged {
    let ok = r0 + sr < r_end && u_ok;
    let wrow = (p.row0 + min(r0 + sr, p.n_rows - 1u)) * p.row_bytes;
    let q = stage_w_quarter(wrow, uc, dh, ok);
    return Staged(vec4<f16>(q[0]), vec4<f16>(q[1]), vec4<f16>(q[2]), vec4<f16>(q[3]));
}

// Stores half dh (16 weights) of unit `su` of the tile's TU for step row `sr`.
fn put_w(q: Staged, sr: u32, su: u32, dh: u32) {
    let at = sr * WRS + 8u * su + 4u * dh;
    ws[at] = q.c0;
    ws[at + 1u] = q.c1;
    ws[at + 2u] = q.c2;
    ws[at + 3u] = q.c3;
}

// dY rows r0 + 4 yq .. + 3 of token `t` (of the dispatch), zeros at rows from r_end and
// tokens past the last (indices clamped so every read is in bounds), rounded to f16.
fn dy_quad(r0: u32, r_end: u32, yq: u32, t: u32) -> vec4<f16> {
    let r = vec4<u32>(r0 + 4u * yq) + vec4<u32>(0u, 1u, 2u, 3u);
    let rr = min(r, vec4<u32>(r_end - 1u));
    let at = p.dy_offset + min(t, p.n_tokens - 1u) * p.dy_stride;
    let v = vec4<f32>(x[at + rr.x], x[at + rr.y], x[at + rr.z], x[at + rr.w]);
    let keep = (r < vec4<u32>(r_end)) & vec4<bool>(t < p.n_tokens);
    return vec4<f16>(select(vec4<f32>(0.0), v, keep));
}

// Quad yq of the step's rows from r0 for tokens t + YT_STEP (m0 + j), j < 4 (t of the
// dispatch).
fn stage_dy(r0: u32, r_end: u32, yq: u32, t: u32, m0: u32) -> Staged {
    return Staged(
        dy_quad(r0, r_end, yq, t + YT_STEP * m0),
        dy_quad(r0, r_end, yq, t + YT_STEP * (m0 + 1u)),
        dy_quad(r0, r_end, yq, t + YT_STEP * (m0 + 2u)),
        dy_quad(r0, r_end, yq, t + YT_STEP * (m0 + 3u)),
    );
}

// Stores quad yq of tile tokens yt + YT_STEP (m0 + j), j < 4, as `stage_dy` staged them.
fn put_dy(v: Staged, yt: u32, yq: u32, m0: u32) {
    let at = (yt + YT_STEP * m0) * RS + yq;
    // Tokens YT_STEP apart are YT_STEP rows of the tile apart.
    let rows = YT_STEP * RS;
    xs[at] = v.c0;
    xs[at + rows] = v.c1;
    xs[at + 2u * rows] = v.c2;
    xs[at + 3u * rows] = v.c3;
}

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(local_invocation_index) tid: u32,
) {
    let in0 = wid.x * TM;
    let tok0 = wid.y * TN;
    let units = (p.n_in + 31u) / 32u;

    // Weight staging role: step row `sr`, unit `su` of the tile's TU.
    let sr = tid / TU;
    let su = tid % TU;
    let u = TU * wid.x + su;
    let u_ok = u < units;
    let uc = min(u, units - 1u);
    // dY staging role: quad yq of the step's rows for tokens yt + YT_STEP m.
    let yq = tid % (BR / 4u);
    let yt = tid / (BR / 4u);

    let sg = tid / 32u;
    let lane = tid % 32u;
    coop_lane(lane);
    // Where the subgroup's first input (vec4 column of `ws`) and token (row of `xs`) start.
    let a_base = 8u * (sg % SG_I);
    let b_base = 16u * FT * (sg / SG_I) * RS;
    var c00 = MatC();
    var c01 = MatC();
    var c02 = MatC();
    var c03 = MatC();
    var c10 = MatC();
    var c11 = MatC();
    var c12 = MatC();
    var c13 = MatC();

    let r_begin = min(wid.z * p.rows_per_split, p.n_rows);
    let r_end = min(r_begin + p.rows_per_split, p.n_rows);
    let steps = (r_end - r_begin + BR - 1u) / BR;
    // Step 0 staged in registers before the loop; each step stores what the one before
    // staged and stages the next before its products (software pipelining: the header).
    var w0 = stage_w(r_begin, r_end, sr, uc, u_ok, 0u);
    var w1 = stage_w(r_begin, r_end, sr, uc, u_ok, 1u);
    var d0 = stage_dy(r_begin, r_end, yq, tok0 + yt, 0u);
    var d1: Staged;
    if ND > 4u {
        d1 = stage_dy(r_begin, r_end, yq, tok0 + yt, 4u);
    }
    for (var s = 0u; s < steps; s++) {
        put_w(w0, sr, su, 0u);
        put_w(w1, sr, su, 1u);
        put_dy(d0, yt, yq, 0u);
        if ND > 4u {
            put_dy(d1, yt, yq, 4u);
        }
        workgroupBarrier();
        if s + 1u < steps {
            let r1 = r_begin + BR * (s + 1u);
            w0 = stage_w(r1, r_end, sr, uc, u_ok, 0u);
            w1 = stage_w(r1, r_end, sr, uc, u_ok, 1u);
            d0 = stage_dy(r1, r_end, yq, tok0 + yt, 0u);
            if ND > 4u {
                d1 = stage_dy(r1, r_end, yq, tok0 + yt, 4u);
            }
        }
        for (var h = 0u; h < BR / 16u; h++) {
            let a0 = load_a_cols(a_base + 16u * WRS * h, WRS);
            let a1 = load_a_cols(a_base + 16u * WRS * h + 4u, WRS);
            let b0 = load_b(b_base + 4u * h);
            let b1 = load_b(b_base + 16u * RS + 4u * h);
            c00 = mma(a0, b0, c00);
            c01 = mma(a0, b1, c01);
            c10 = mma(a1, b0, c10);
            c11 = mma(a1, b1, c11);
            if FT == 4u {
                let b2 = load_b(b_base + 32u * RS + 4u * h);
                let b3 = load_b(b_base + 48u * RS + 4u * h);
                c02 = mma(a0, b2, c02);
                c03 = mma(a0, b3, c03);
                c12 = mma(a1, b2, c12);
                c13 = mma(a1, b3, c13);
            }
        }
        workgroupBarrier();
    }

    let i0 = in0 + 32u * (sg % SG_I);
    let t0 = tok0 + 16u * FT * (sg / SG_I);
    let scratch = 256u * sg;
    let split_at = wid.z * p.split_stride;
    store_partial(c00, scratch, lane, i0, t0, split_at);
    store_partial(c01, scratch, lane, i0, t0 + 16u, split_at);
    store_partial(c10, scratch, lane, i0 + 16u, t0, split_at);
    store_partial(c11, scratch, lane, i0 + 16u, t0 + 16u, split_at);
    if FT == 4u {
        store_partial(c02, scratch, lane, i0, t0 + 32u, split_at);
        store_partial(c03, scratch, lane, i0, t0 + 48u, split_at);
        store_partial(c12, scratch, lane, i0 + 16u, t0 + 32u, split_at);
        store_partial(c13, scratch, lane, i0 + 16u, t0 + 48u, split_at);
    }
}
