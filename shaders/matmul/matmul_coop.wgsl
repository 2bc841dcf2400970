// The prompt matmul on the tensor cores: Y[t, r] = sum_i X[t, i] * W[r, i], with the contract of
// matmul.wgsl (params.wgsl: Params, bindings, Y layout; any format through `decode_half`).
// The cooperative-matrix types and ops (MatA, MatB, MatC, coop_lane, mma; load_a, load_b,
// store_y, store_scratch) come from common/coop_ops.wgsl and matmul/coop_io.wgsl, or in the
// tests' emulation from common/coop_emul.wgsl and matmul/coop_io_emul.wgsl.
//
// Workgroup (row tile, token tile) of WG invocations computes TM rows x TN tokens, walking the
// inputs two units (UNITS x BK = 64 inputs) per barrier. Two tiles, everything derived from
// WG: 128 invocations (4 subgroups of 32) take 64 x 64, 256 (8 subgroups) take 128 x 128,
// which stages half as many values per product (the Rust side picks it where it still makes
// enough workgroups):
// - Staging, as in matmul.wgsl: invocation i takes half i % 2 of row i / 2's unit and 4 x 4
//   consecutive inputs (quad i % 8 of tokens i / 8 + (WG / 8) m), for two units at once (the
//   second zero past the workgroup's last unit). Units u + 2 and u + 3 are loaded into
//   registers before units u and u + 1's products (software pipelining: the loads' latency
//   overlaps the tensor-core work; docs/PERF.md, D-coop-pipelining), two units a barrier
//   instead of one (D-two-units-a-barrier). The weights are held as the format's loaded words
//   (`load_w_half`), the inputs as loaded f32s (`StagedX`), in named registers (an array
//   indexed in a loop was spilled: D-named-registers); the weights are decoded (`decode_raw`:
//   f32, the quant crate's arithmetic), both masked and rounded to f16 only where they are
//   stored as vec4<f16> after the barrier (`put_w`, `put_x`; matmul/coop_stage.wgsl), so no
//   invocation waits on its loads before the products. Two stages of tiles in workgroup memory
//   (one barrier a unit instead of two) speed up a 4096x4096 product but slow an 896x4864
//   one and the prefill, half the workgroups fitting an SM (X-coop-two-stages); vec4 loads of X
//   (one instead of four scalar ones) are slower (X-vec4-x-staging).
// - Tiles `[row][UNITS * BK]` of vec4<f16> with a row stride of RS = 18 vec4s (64 values + 8
//   of padding, 144 bytes): a coop load reads 8 rows of 16 bytes at a time, and rows 144 bytes
//   apart start in 8 distinct groups of 4 banks. Every row and every 16-input quarter starts
//   16-byte aligned, as Vulkan requires of a cooperative-matrix load's pointer and stride.
// - Subgroup s owns rows 32 (s % SG_ROWS) .. + 31 and tokens SG_TOKENS (s / SG_ROWS) .. of the
//   tile (32 x 32 in the small tile, 32 x 64 in the wide one) as 2 x SG_TOKENS / 16
//   accumulators of 16 x 16 in f32. Per unit: 2 halves of 16 inputs, each 2 A loads (W rows,
//   row-major), SG_TOKENS / 16 B loads (X^T: a token's inputs are a column, so column-major)
//   and 2 SG_TOKENS / 16 multiply-adds. C is rows x tokens, so Y = C^T is C stored column-major with stride y_stride.
// - The subgroup index is local_invocation_index / 32: Caps::coop_f16 holds only where the
//   subgroup is exactly 32 wide, so each subgroup's coop ops have one subgroup to themselves.
// - Every invocation reaches every coop op in uniform control flow: loops have uniform bounds
//   and the only branch around coop ops (`whole`) depends on the workgroup id and parameters.
// - Output: a workgroup whose tile lies inside Y, in one output (`y_tile` of the place
//   file: always with one output; with split outputs when the tile's rows do not straddle a
//   boundary), with that output's offset and stride multiples of 4 (16-byte aligned column
//   starts), stores its accumulators straight into y when the value epilogue is the identity
//   (Y_OUT_IDENTITY: no bias). Others store each accumulator into a 16 x 16 f32 scratch of the
//   subgroup and write the elements inside Y one by one (`store_partial` of
//   matmul/coop_stage.wgsl) through `y_out(row, sum)`
//   (common/out_store.wgsl or common/out_bias.wgsl) at `y_index` (common/out_one.wgsl or
//   common/out_split.wgsl); the weight row a dispatch row reads is `w_row`'s.
// Precision: inputs rounded to f16 (one f16 ulp each: WGSL leaves the rounding direction to the
// implementation), products exact in f32 and summed in f32 by the tensor cores (docs/KERNELS.md
// has the bound). Values beyond f16's range (|v| > 65504) become infinite.

// Params and bindings: matmul/params.wgsl, X as f32s:
@group(0) @binding(2) var<storage, read> x: array<f32>;

// 128 or 256 (4 or 8 subgroups of 32): the tile follows.
override WG: u32 = 128u;
override TM: u32 = WG / 2u;
override TN: u32 = WG / 2u;
// Subgroups along the rows (32 rows each) and the tokens of one subgroup.
override SG_ROWS: u32 = TM / 32u;
override SG_TOKENS: u32 = TN * SG_ROWS * 32u / WG;
const BK: u32 = 32u;
// Units staged per barrier; a row of the tiles holds them side by side.
const UNITS: u32 = 2u;
const RS: u32 = 18u;

// The tiles' lengths, named: naga 30 cannot process an unnamed override (an array length
// written as an expression becomes one).
override WS_LEN: u32 = TM * RS;
override XS_LEN: u32 = TN * RS;
override CS_LEN: u32 = WG * 8u;
var<workgroup> ws: array<vec4<f16>, WS_LEN>;
var<workgroup> xs: array<vec4<f16>, XS_LEN>;
// One 16 x 16 accumulator per subgroup, column-major (64-byte columns), for partial tiles.
var<workgroup> cs: array<f32, CS_LEN>;

// Quad xq of unit u's inputs for token tok0 + xt + (WG / 8) m as loaded (indices clamped so
// every load is in bounds; `stage_x` says which count).
fn x_quad(tok0: u32, u: u32, xq: u32, xt: u32, m: u32) -> vec4<f32> {
    let k = vec4<u32>(BK * u + 4u * xq) + vec4<u32>(0u, 1u, 2u, 3u);
    let kk = min(k, vec4<u32>(p.n_in - 1u));
    let t = tok0 + xt + (WG / 8u) * m;
    let row = p.x_offset + min(t, p.n_tokens - 1u) * p.x_stride;
    return vec4<f32>(x[row + kk.x], x[row + kk.y], x[row + kk.z], x[row + kk.w]);
}

// Quad xq of unit u's inputs for tokens tok0 + xt + (WG / 8) m (m < 4): zeros past n_in, past
// the last token and where `ok` is false.
fn stage_x(tok0: u32, u: u32, xq: u32, xt: u32, ok: bool) -> StagedX {
    let k0 = min(BK * u + 4u * xq, p.n_in);
    let t = vec4<u32>(tok0 + xt) + (WG / 8u) * vec4<u32>(0u, 1u, 2u, 3u);
    let n_q = select(0u, dot(vec4<u32>(t < vec4<u32>(p.n_tokens)), vec4<u32>(1u)), ok);
    return StagedX(
        x_quad(tok0, u, xq, xt, 0u),
        x_quad(tok0, u, xq, xt, 1u),
        x_quad(tok0, u, xq, xt, 2u),
        x_quad(tok0, u, xq, xt, 3u),
        min(p.n_in - k0, 4u),
        n_q,
    );
}

// Stores quad xq of tokens xt + (WG / 8) m at column `col` (vec4s) of the input tile.
fn put_x(v: StagedX, xt: u32, xq: u32, col: u32) {
    let at = xt * RS + col + xq;
    // Tokens xt + (WG / 8) m are WG / 8 rows apart.
    let rows = (WG / 8u) * RS;
    xs[at] = staged_quad(v, v.c0, 0u);
    xs[at + rows] = staged_quad(v, v.c1, 1u);
    xs[at + 2u * rows] = staged_quad(v, v.c2, 2u);
    xs[at + 3u * rows] = staged_quad(v, v.c3, 3u);
}

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(local_invocation_index) tid: u32,
) {
    let row0 = wid.x * TM;
    let tok0 = wid.y * TN;

    // Staging roles. Rows past the chunk read its last row (in bounds) and store zeros. The
    // plane header is read once, so a planar format's loads do not wait on it first.
    planes_begin();
    let dr = tid / 2u;
    let dh = tid % 2u;
    let row_ok = row0 + dr < p.n_rows;
    let wrow = w_row(min(row0 + dr, p.n_rows - 1u)) * p.row_bytes;
    let xq = tid % 8u;
    let xt = tid / 8u;

    // Compute role: subgroup sg's part of the tile (accumulators c<row block><token block>;
    // token blocks 2 and 3 only in the wide tile).
    let sg = tid / 32u;
    let lane = tid % 32u;
    coop_lane(lane);
    let a_base = 32u * (sg % SG_ROWS) * RS;
    let b_base = SG_TOKENS * (sg / SG_ROWS) * RS;
    var c00 = MatC();
    var c01 = MatC();
    var c10 = MatC();
    var c11 = MatC();
    var c02 = MatC();
    var c03 = MatC();
    var c12 = MatC();
    var c13 = MatC();

    // The input units this workgroup sums: all, or split z's share (split K).
    var u_begin = 0u;
    var u_end = (p.n_in + BK - 1u) / BK;
    if p.k_units > 0u {
        u_begin = min(wid.z * p.k_units, u_end);
        u_end = min(u_begin + p.k_units, u_end);
    }
    // Where this workgroup's sums go: y, or split z's slice of the scratch.
    let y0 = p.y_offset + wid.z * p.k_slice;
    // Units u and u + 1 staged together (the second zero past u_end). Software pipelining:
    // the next pair's global loads are issued before this pair's products (the weights
    // decoded only when stored), so their latency overlaps the tensor-core work instead of
    // stalling the staging that follows the barrier.
    let u_last = max(u_end, 1u) - 1u;
    var q0 = load_w_half(wrow, min(u_begin, u_last), dh, row_ok);
    var q1 = load_w_half(wrow, min(u_begin + 1u, u_last), dh, row_ok && u_begin + 1u < u_end);
    var xv0 = stage_x(tok0, u_begin, xq, xt, true);
    var xv1 = stage_x(tok0, u_begin + 1u, xq, xt, u_begin + 1u < u_end);
    for (var u = u_begin; u < u_end; u += UNITS) {
        put_w(q0, dr, dh, 0u);
        put_w(q1, dr, dh, BK / 4u);
        put_x(xv0, xt, xq, 0u);
        put_x(xv1, xt, xq, BK / 4u);
        workgroupBarrier();
        if u + UNITS < u_end {
            q0 = load_w_half(wrow, u + 2u, dh, row_ok);
            q1 = load_w_half(wrow, min(u + 3u, u_last), dh, row_ok && u + 3u < u_end);
            xv0 = stage_x(tok0, u + 2u, xq, xt, true);
            xv1 = stage_x(tok0, u + 3u, xq, xt, u + 3u < u_end);
        }
        for (var h = 0u; h < 2u * UNITS; h++) {
            let a0 = load_a(a_base + 4u * h);
            let a1 = load_a(a_base + 16u * RS + 4u * h);
            let b0 = load_b(b_base + 4u * h);
            let b1 = load_b(b_base + 16u * RS + 4u * h);
            c00 = mma(a0, b0, c00);
            c01 = mma(a0, b1, c01);
            c10 = mma(a1, b0, c10);
            c11 = mma(a1, b1, c11);
            if SG_TOKENS == 64u {
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

    let r0 = row0 + 32u * (sg % SG_ROWS);
    let t0 = tok0 + SG_TOKENS * (sg / SG_ROWS);
    // The tile's place: uniform (the workgroup id and parameters), as the coop stores need.
    let tile = y_tile(row0, row0 + TM - 1u, vec2<u32>(y0, p.y_stride));
    let whole = Y_OUT_IDENTITY && tile.z == 1u && row0 + TM <= p.n_rows
        && tok0 + TN <= p.n_tokens && tile.x % 4u == 0u && tile.y % 4u == 0u;
    if whole {
        let ys = tile.y;
        let at = tile.x + t0 * ys + r0;
        store_y(c00, at, ys);
        store_y(c01, at + 16u * ys, ys);
        store_y(c10, at + 16u, ys);
        store_y(c11, at + 16u * ys + 16u, ys);
        if SG_TOKENS == 64u {
            store_y(c02, at + 32u * ys, ys);
            store_y(c03, at + 48u * ys, ys);
            store_y(c12, at + 32u * ys + 16u, ys);
            store_y(c13, at + 48u * ys + 16u, ys);
        }
    } else {
        let scratch = 256u * sg;
        store_partial(c00, scratch, lane, r0, t0, y0);
        store_partial(c01, scratch, lane, r0, t0 + 16u, y0);
        store_partial(c10, scratch, lane, r0 + 16u, t0, y0);
        store_partial(c11, scratch, lane, r0 + 16u, t0 + 16u, y0);
        if SG_TOKENS == 64u {
            store_partial(c02, scratch, lane, r0, t0 + 32u, y0);
            store_partial(c03, scratch, lane, r0, t0 + 48u, y0);
            store_partial(c12, scratch, lane, r0 + 16u, t0 + 32u, y0);
            store_partial(c13, scratch, lane, r0 + 16u, t0 + 48u, y0);
        }
    }
}
