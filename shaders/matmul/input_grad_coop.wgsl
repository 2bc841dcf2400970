// The input gradient on the tensor cores: dX[t, i] (+)= sum_r dY[t, r] W[row0 + r, i], the
// contract of input_grad.wgsl (matmul/input_grad_params.wgsl: Params, bindings, the weight's
// staging). The cooperative-matrix types and ops (MatA, MatB, MatC, coop_lane, mma;
// load_a_cols, load_b, store_scratch) come from common/coop_ops.wgsl and matmul/coop_io.wgsl,
// or in the tests' emulation from common/coop_emul.wgsl and matmul/coop_io_emul.wgsl: A is the
// weight tile `ws` (inputs x rows: a weight row's inputs are consecutive, so column-major), B
// the dY tile `xs` (rows x tokens: a token's rows are consecutive, so column-major), C inputs x
// tokens.
//
// Workgroup (input tile, token tile) of 128 (4 subgroups of 32) computes 64 inputs x 64
// tokens, walking the weight's rows 64 at a time (4 products of 16 per barrier):
// - `ws` holds the weights as decoded, `[step row][input]`: invocation i decodes unit
//   2 wid.x + i % 2 (both halves, `decode_half` in f32, the quant crate's arithmetic) of step
//   row i / 2 and stores its 32 weights, rounded to f16, as 8 vec4<f16> of 4 consecutive
//   inputs. Stored transposed (`[input][row]`, as A row-major) they would take 32 scalar f16
//   stores at strided addresses, with bank conflicts; A is loaded column-major instead.
// - `xs` holds dY as `[token][row]`: invocation i reads rows 4 (i % 16) .. + 3 of the step
//   for tokens i / 16 + 8m (m < 8), 4 consecutive floats, and stores them as one vec4<f16>:
//   a subgroup's loads cover 64 consecutive floats of each of two tokens.
// - Software pipelining, as matmul_coop.wgsl's: both are rounded to f16 as they are loaded
//   and held in named registers (`Staged`: an array indexed in a loop was spilled,
//   D-named-registers), and step s + 1's global loads and decode are issued after step s's
//   stores and barrier, before its products, so their latency overlaps the tensor-core work
//   instead of stalling the staging between the barriers; the registers are stored to the
//   tiles at the top of the next step. Registers, not a second stage of tiles: in the
//   forward two stages halved the workgroups an SM holds and slowed the smaller products and
//   the prefill (docs/PERF.md, X-coop-two-stages).
// - Both tiles are [64][64] f16 in vec4s with a row stride of RS = 18 vec4s (144 bytes), as
//   the forward's: every row and every 16-value quarter starts 16-byte aligned, as Vulkan
//   requires of a cooperative-matrix load.
// - Subgroup s owns inputs 32 (s % 2) .. + 31 and tokens 32 (s / 2) .. + 31 as 2 x 2
//   accumulators of 16 x 16 in f32.
// - Output: every accumulator through a 16 x 16 f32 scratch of its subgroup, then each
//   element inside dX stored (or added, `accumulate`) one by one.
// - Every invocation reaches every coop op in uniform control flow: loop bounds are uniform
//   and no branch encloses a coop op (the next step's loads sit in a branch on the step
//   alone, uniform, holding none).
// Precision: weights and dY rounded to f16 (one f16 ulp each), products exact in f32 and
// summed in f32 by the tensor cores (the bound: ops/matmul_input_grad.rs).

override WG: u32 = 128u;
const TM: u32 = 64u;
const TN: u32 = 64u;
// Weight rows per barrier.
const BR: u32 = 64u;
const RS: u32 = 18u;

var<workgroup> ws: array<vec4<f16>, 1152>; // BR * RS
var<workgroup> xs: array<vec4<f16>, 1152>; // TN * RS
// One 16 x 16 accumulator per subgroup, column-major.
var<workgroup> cs: array<f32, 1024>; // 4 subgroups * 256

// Adds or stores accumulator `c` (inputs i0.., tokens t0..) into dX (split_at elements on:
// a split's slice) through the subgroup's scratch at cs[scratch..], keeping only elements
// inside dX. Called by every invocation in
// uniform control flow (it holds barriers).
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

// Stores half dh (16 weights) of unit `su` of the tile's two for step row `sr`.
fn put_w(q: Staged, sr: u32, su: u32, dh: u32) {
    let at = sr * RS + 8u * su + 4u * dh;
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

// Quad yq of the step's rows from r0 for tokens t + 8 (m0 + j), j < 4 (t of the dispatch).
fn stage_dy(r0: u32, r_end: u32, yq: u32, t: u32, m0: u32) -> Staged {
    return Staged(
        dy_quad(r0, r_end, yq, t + 8u * m0),
        dy_quad(r0, r_end, yq, t + 8u * (m0 + 1u)),
        dy_quad(r0, r_end, yq, t + 8u * (m0 + 2u)),
        dy_quad(r0, r_end, yq, t + 8u * (m0 + 3u)),
    );
}

// Stores quad yq of tile tokens yt + 8 (m0 + j), j < 4, as `stage_dy` staged them.
fn put_dy(v: Staged, yt: u32, yq: u32, m0: u32) {
    let at = (yt + 8u * m0) * RS + yq;
    // Tokens 8 apart are 8 rows of the tile apart.
    let rows = 8u * RS;
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

    // Weight staging role: step row `sr`, unit `su` of the tile's two.
    let sr = tid / 2u;
    let su = tid % 2u;
    let u = 2u * wid.x + su;
    let u_ok = u < units;
    let uc = min(u, units - 1u);
    // dY staging role: quad yq of the step's rows for tokens yt + 8m.
    let yq = tid % (BR / 4u);
    let yt = tid / (BR / 4u);

    let sg = tid / 32u;
    let lane = tid % 32u;
    coop_lane(lane);
    // Where the subgroup's first input (vec4 column of `ws`) and token (row of `xs`) start.
    let a_base = 8u * (sg % 2u);
    let b_base = 32u * (sg / 2u) * RS;
    var c00 = MatC();
    var c01 = MatC();
    var c10 = MatC();
    var c11 = MatC();

    let r_begin = min(wid.z * p.rows_per_split, p.n_rows);
    let r_end = min(r_begin + p.rows_per_split, p.n_rows);
    let steps = (r_end - r_begin + BR - 1u) / BR;
    // Step 0 staged in registers before the loop; each step stores what the one before
    // staged and stages the next before its products (software pipelining: the header).
    var w0 = stage_w(r_begin, r_end, sr, uc, u_ok, 0u);
    var w1 = stage_w(r_begin, r_end, sr, uc, u_ok, 1u);
    var d0 = stage_dy(r_begin, r_end, yq, tok0 + yt, 0u);
    var d1 = stage_dy(r_begin, r_end, yq, tok0 + yt, 4u);
    for (var s = 0u; s < steps; s++) {
        put_w(w0, sr, su, 0u);
        put_w(w1, sr, su, 1u);
        put_dy(d0, yt, yq, 0u);
        put_dy(d1, yt, yq, 4u);
        workgroupBarrier();
        if s + 1u < steps {
            let r1 = r_begin + BR * (s + 1u);
            w0 = stage_w(r1, r_end, sr, uc, u_ok, 0u);
            w1 = stage_w(r1, r_end, sr, uc, u_ok, 1u);
            d0 = stage_dy(r1, r_end, yq, tok0 + yt, 0u);
            d1 = stage_dy(r1, r_end, yq, tok0 + yt, 4u);
        }
        for (var h = 0u; h < BR / 16u; h++) {
            let a0 = load_a_cols(a_base + 16u * RS * h);
            let a1 = load_a_cols(a_base + 16u * RS * h + 4u);
            let b0 = load_b(b_base + 4u * h);
            let b1 = load_b(b_base + 16u * RS + 4u * h);
            c00 = mma(a0, b0, c00);
            c01 = mma(a0, b1, c01);
            c10 = mma(a1, b0, c10);
            c11 = mma(a1, b1, c11);
        }
        workgroupBarrier();
    }

    let i0 = in0 + 32u * (sg % 2u);
    let t0 = tok0 + 32u * (sg / 2u);
    let scratch = 256u * sg;
    let split_at = wid.z * p.split_stride;
    store_partial(c00, scratch, lane, i0, t0, split_at);
    store_partial(c01, scratch, lane, i0, t0 + 16u, split_at);
    store_partial(c10, scratch, lane, i0 + 16u, t0, split_at);
    store_partial(c11, scratch, lane, i0 + 16u, t0 + 16u, split_at);
}
