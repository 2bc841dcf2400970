// Products of a few token rows on the tensor cores (a server's batched decode: M <= 64 rows of
// X against a weight read once): Y[t, r] = sum_i X[t, i] * W[r, i], with the contract of the
// prompt matmul (matmul/params.wgsl: Params, bindings, Y layout, split K; any format through
// `decode_half`) and its numbers (weights and inputs rounded to f16, f32 sums on the tensor
// cores). The coop types and ops come from common/coop_ops.wgsl and matmul/coop_io.wgsl (in the
// tests' emulation common/coop_emul.wgsl and matmul/coop_io_emul.wgsl), the weight staging and
// the partial-tile store from matmul/coop_stage.wgsl.
//
// The prompt kernel pads M to a 64- or 128-token tile and walks K one row tile at a time, so a
// few rows cost what 64 do and its few workgroups wait on each unit's loads. Here a workgroup
// takes a slab of TM weight rows and all (up to 64) tokens over its share of the inputs (split
// K over the grid's z: the host picks the splits so that the grid fills the GPU several times
// over; matmul/reduce_k.wgsl adds the shares up), and every weight block is decoded once:
// - Invocation i decodes half i % 2 of row i / 2's unit (TM = WG / 2 rows, `stage_unit`), UNITS
//   units per barrier, and stages the inputs of the 16 nb tokens that exist (nb = ceil(M / 16)
//   blocks of 16, M padded with zeros): quad j of the stage is token j / (8 UNITS), inputs
//   4 (j % (8 UNITS)).. of the stage; invocation i takes quads i + WG m. Quads of tokens past
//   16 nb are neither loaded nor stored, so M = 8 loads an eighth of M = 64's inputs.
// - Software pipelining as in matmul_coop: the next stage's weights (the format's loaded words)
//   and inputs (f32) are loaded into named registers before this stage's products, so their
//   latency overlaps the tensor-core work and the other workgroups' loads; they are decoded,
//   masked and rounded to f16 only where they are stored after the barrier (`put_w`,
//   `put_x`), so no invocation waits on its loads before the products.
// - Tiles `[row][UNITS * 32]` of vec4<f16>, rows RS = 8 UNITS + 2 vec4s apart (16 UNITS + 4
//   words: rows start in distinct 4-bank groups, every row and 16-input quarter 16-byte aligned
//   as Vulkan requires of a coop load).
// - Subgroup s owns rows 16 s .. 16 s + 15 of the slab (one A fragment) and every token block:
//   per 16 inputs one A load, nb B loads and nb multiply-adds into accumulators c0..c3.
// - Every coop op is in uniform control flow: loop bounds and the branches around coop ops
//   depend only on the workgroup id and the parameters (nb too).
// - Output: a token block wholly inside Y, in one output whose offset and stride are multiples
//   of 4, with the identity value epilogue, is stored straight from its accumulator; others go
//   through the subgroup's 16 x 16 scratch and `y_out` / `y_index`, element by element.

// Params and bindings: matmul/params.wgsl, X as f32s:
@group(0) @binding(2) var<storage, read> x: array<f32>;

// 128 or 256 invocations (4 or 8 subgroups of 32): TM = WG / 2 rows, 16 a subgroup.
override WG: u32 = 128u;
override TM: u32 = WG / 2u;
// Units of 32 inputs staged per barrier (1, 2 or 4).
override UNITS: u32 = 2u;
// Tokens a workgroup takes (the grid's y walks further blocks of them).
const TN: u32 = 64u;
override RS: u32 = 8u * UNITS + 2u;
// The groups of 4 input quads an invocation stages: the stage's TN x 8 UNITS quads over WG
// invocations, at least one group (1, 2 or 4).
override X_GROUPS: u32 = (2u * UNITS * TN + WG - 1u) / WG;

// The tiles' lengths, named: naga 30 cannot process an unnamed override (an array length
// written as an expression becomes one).
override WS_LEN: u32 = TM * RS;
override XS_LEN: u32 = TN * RS;
override CS_LEN: u32 = WG * 8u;
var<workgroup> ws: array<vec4<f16>, WS_LEN>;
var<workgroup> xs: array<vec4<f16>, XS_LEN>;
// One 16 x 16 accumulator per subgroup, column-major (64-byte columns), for partial blocks.
var<workgroup> cs: array<f32, CS_LEN>;

// What a workgroup's stages share: its first token, the tokens it stages (16 nb) and the end
// of its input units.
struct Slab {
    tok0: u32,
    tokens: u32,
    u_end: u32,
}

// Whether quad i of the stage from unit u0 (an invocation takes i = tid + WG j) is loaded: its
// token is staged and exists, its unit is before u_end.
fn x_quad_ok(s: Slab, u0: u32, i: u32) -> bool {
    let t = i / (8u * UNITS);
    return t < s.tokens && s.tok0 + t < p.n_tokens && u0 + (i % (8u * UNITS)) / 8u < s.u_end;
}

// Quad i of the stage from unit u0, as loaded: 4 inputs of one token (indices clamped to
// n_in), zeros where `x_quad_ok` is false (nothing loaded).
fn x_quad(s: Slab, u0: u32, i: u32) -> vec4<f32> {
    let t = i / (8u * UNITS);
    let q = i % (8u * UNITS);
    var v = vec4<f32>(0.0);
    if x_quad_ok(s, u0, i) {
        let k = vec4<u32>(32u * (u0 + q / 8u) + 4u * (q % 8u)) + vec4<u32>(0u, 1u, 2u, 3u);
        let kk = min(k, vec4<u32>(p.n_in - 1u));
        let row = p.x_offset + (s.tok0 + t) * p.x_stride;
        v = vec4<f32>(x[row + kk.x], x[row + kk.y], x[row + kk.z], x[row + kk.w]);
    }
    return v;
}

// Quads g, g + 1, g + 2, g + 3 (times WG, from tid) of the stage from unit u0: zeros past n_in,
// past unit u_end, past the last token. WG is a multiple of a token's 8 UNITS quads, so the
// four hold the same inputs of later tokens.
fn stage_x(s: Slab, u0: u32, tid: u32, g: u32) -> StagedX {
    let i = tid + 4u * g * WG;
    let q = i % (8u * UNITS);
    let k0 = min(32u * (u0 + q / 8u) + 4u * (q % 8u), p.n_in);
    let ok = vec4<bool>(
        x_quad_ok(s, u0, i),
        x_quad_ok(s, u0, i + WG),
        x_quad_ok(s, u0, i + 2u * WG),
        x_quad_ok(s, u0, i + 3u * WG),
    );
    return StagedX(
        x_quad(s, u0, i),
        x_quad(s, u0, i + WG),
        x_quad(s, u0, i + 2u * WG),
        x_quad(s, u0, i + 3u * WG),
        min(p.n_in - k0, 4u),
        dot(vec4<u32>(ok), vec4<u32>(1u)),
    );
}

fn put_x_quad(s: Slab, v: vec4<f16>, i: u32) {
    let t = i / (8u * UNITS);
    if t < s.tokens {
        xs[t * RS + i % (8u * UNITS)] = v;
    }
}

fn put_x(s: Slab, v: StagedX, tid: u32, g: u32) {
    let i = tid + 4u * g * WG;
    put_x_quad(s, staged_quad(v, v.c0, 0u), i);
    put_x_quad(s, staged_quad(v, v.c1, 1u), i + WG);
    put_x_quad(s, staged_quad(v, v.c2, 2u), i + 2u * WG);
    put_x_quad(s, staged_quad(v, v.c3, 3u), i + 3u * WG);
}

// Half dh of unit u's weights, loaded (zeros from u_end on; the read clamped to the last
// unit).
fn stage_unit(wrow: u32, u: u32, dh: u32, row_ok: bool, u_end: u32) -> WeightHalf {
    return load_w_half(wrow, min(u, max(u_end, 1u) - 1u), dh, row_ok && u < u_end);
}

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(local_invocation_index) tid: u32,
) {
    let row0 = wid.x * TM;
    let tok0 = wid.y * TN;
    // Token blocks of 16 this workgroup holds (uniform: the parameters and the workgroup id).
    let nb = min(TN, p.n_tokens - tok0 + 15u) / 16u;

    // The input units this workgroup sums: all, or split z's share (split K).
    var u_begin = 0u;
    var u_end = (p.n_in + 31u) / 32u;
    if p.k_units > 0u {
        u_begin = min(wid.z * p.k_units, u_end);
        u_end = min(u_begin + p.k_units, u_end);
    }
    let s = Slab(tok0, 16u * nb, u_end);
    // Where this workgroup's sums go: y, or split z's slice of the scratch.
    let y0 = p.y_offset + wid.z * p.k_slice;

    // Staging roles. Rows past the chunk read its last row (in bounds) and store zeros. The
    // plane header is read once, so a planar format's loads do not wait on it first.
    planes_begin();
    let dr = tid / 2u;
    let dh = tid % 2u;
    let row_ok = row0 + dr < p.n_rows;
    let wrow = w_row(min(row0 + dr, p.n_rows - 1u)) * p.row_bytes;

    // Compute role: subgroup sg's 16 rows, every token block.
    let sg = tid / 32u;
    let lane = tid % 32u;
    coop_lane(lane);
    let a_base = 16u * sg * RS;
    var c0 = MatC();
    var c1 = MatC();
    var c2 = MatC();
    var c3 = MatC();

    // The first stage, into registers.
    var q0 = stage_unit(wrow, u_begin, dh, row_ok, u_end);
    var q1 = q0;
    var q2 = q0;
    var q3 = q0;
    if UNITS > 1u {
        q1 = stage_unit(wrow, u_begin + 1u, dh, row_ok, u_end);
    }
    if UNITS > 2u {
        q2 = stage_unit(wrow, u_begin + 2u, dh, row_ok, u_end);
        q3 = stage_unit(wrow, u_begin + 3u, dh, row_ok, u_end);
    }
    var x0 = stage_x(s, u_begin, tid, 0u);
    var x1 = x0;
    var x2 = x0;
    var x3 = x0;
    if X_GROUPS > 1u {
        x1 = stage_x(s, u_begin, tid, 1u);
    }
    if X_GROUPS > 2u {
        x2 = stage_x(s, u_begin, tid, 2u);
        x3 = stage_x(s, u_begin, tid, 3u);
    }

    for (var u = u_begin; u < u_end; u += UNITS) {
        put_w(q0, dr, dh, 0u);
        if UNITS > 1u {
            put_w(q1, dr, dh, 8u);
        }
        if UNITS > 2u {
            put_w(q2, dr, dh, 16u);
            put_w(q3, dr, dh, 24u);
        }
        put_x(s, x0, tid, 0u);
        if X_GROUPS > 1u {
            put_x(s, x1, tid, 1u);
        }
        if X_GROUPS > 2u {
            put_x(s, x2, tid, 2u);
            put_x(s, x3, tid, 3u);
        }
        workgroupBarrier();
        // The next stage's loads, before this stage's products.
        let un = u + UNITS;
        if un < u_end {
            q0 = stage_unit(wrow, un, dh, row_ok, u_end);
            if UNITS > 1u {
                q1 = stage_unit(wrow, un + 1u, dh, row_ok, u_end);
            }
            if UNITS > 2u {
                q2 = stage_unit(wrow, un + 2u, dh, row_ok, u_end);
                q3 = stage_unit(wrow, un + 3u, dh, row_ok, u_end);
            }
            x0 = stage_x(s, un, tid, 0u);
            if X_GROUPS > 1u {
                x1 = stage_x(s, un, tid, 1u);
            }
            if X_GROUPS > 2u {
                x2 = stage_x(s, un, tid, 2u);
                x3 = stage_x(s, un, tid, 3u);
            }
        }
        for (var h = 0u; h < 2u * UNITS; h++) {
            let a = load_a(a_base + 4u * h);
            let b0 = load_b(4u * h);
            c0 = mma(a, b0, c0);
            if nb > 1u {
                let b1 = load_b(16u * RS + 4u * h);
                c1 = mma(a, b1, c1);
            }
            if nb > 2u {
                let b2 = load_b(32u * RS + 4u * h);
                c2 = mma(a, b2, c2);
            }
            if nb > 3u {
                let b3 = load_b(48u * RS + 4u * h);
                c3 = mma(a, b3, c3);
            }
        }
        workgroupBarrier();
    }

    // The slab's place: uniform (the workgroup id and parameters), as the coop stores need.
    let r0 = row0 + 16u * sg;
    let tile = y_tile(row0, row0 + TM - 1u, vec2<u32>(y0, p.y_stride));
    let rows_whole = Y_OUT_IDENTITY && tile.z == 1u && row0 + TM <= p.n_rows
        && tile.x % 4u == 0u && tile.y % 4u == 0u;
    let ys = tile.y;
    let at = tile.x + tok0 * ys + r0;
    let whole = vec4<bool>(rows_whole) & (vec4<u32>(tok0 + 16u) + vec4<u32>(0u, 16u, 32u, 48u)
        <= vec4<u32>(p.n_tokens));
    // Each block straight into y where whole, else through the subgroup's scratch.
    let scratch = 256u * sg;
    if whole.x {
        store_y(c0, at, ys);
    } else {
        store_partial(c0, scratch, lane, r0, tok0, y0);
    }
    if nb > 1u {
        if whole.y {
            store_y(c1, at + 16u * ys, ys);
        } else {
            store_partial(c1, scratch, lane, r0, tok0 + 16u, y0);
        }
    }
    if nb > 2u {
        if whole.z {
            store_y(c2, at + 32u * ys, ys);
        } else {
            store_partial(c2, scratch, lane, r0, tok0 + 32u, y0);
        }
    }
    if nb > 3u {
        if whole.w {
            store_y(c3, at + 48u * ys, ys);
        } else {
            store_partial(c3, scratch, lane, r0, tok0 + 48u, y0);
        }
    }
}
