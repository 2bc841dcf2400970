// The prompt matmul on the tensor cores over f16 weights staged as they are stored: the
// contract of matmul.wgsl (params.wgsl: Params, bindings, Y layout), for a weight in F16 whose
// rows are whole units of 32 inputs (n_in % 32 == 0), X read 16 bytes at a time: f32 values
// (X_PER_LOAD 4; X's offset and token stride multiples of 4) or, on the dense route, the f16
// copy of them that ops/f16_copy_x.rs makes (X_PER_LOAD 8; offset and stride in halves,
// multiples of 8), which halves the bytes every tile reads of X: on qwen2.5-7b's products at
// 922 tokens X is re-read by each of the 28-296 row tiles and was half of what a tile loaded
// (docs/PERF.md, D-dense-f16-x). With nothing to decode, a weight tile is copied into workgroup
// memory 16 bytes at a time, so the workgroup can take a larger tile than matmul_coop.wgsl's
// (whose every staged weight passes through `decode_half`), and every
// subgroup a larger share of it: up to 64 x 64, sixteen 16 x 16 accumulators, which halves the
// tile loads per product of the 32 x 32 share.
// The cooperative-matrix types and ops come from common/coop_ops.wgsl and matmul/coop_io.wgsl
// (common/coop_emul.wgsl and matmul/coop_io_emul.wgsl in the tests' emulation).
//
// Workgroup (row tile, token tile) of WG invocations (subgroups of 32) computes TM rows x TN
// tokens, one unit of BK inputs (32 or 64, the host's choice per tile) per barrier:
// - Staging: TM x BK / 8 16-byte pieces of weights (8 f16 each) and TN x BK / X_PER_LOAD
//   16-byte pieces of inputs, spread over the invocations so that neighbours read neighbouring
//   bytes; unit u + 1 is loaded into registers before unit u's products (as matmul_coop.wgsl),
//   as loaded: f32 inputs are rounded to f16 where they are stored, after the barrier. A
//   unit's inputs past the sum's end (n_in, or split K's share) stage zeros.
// - Tiles `[row][BK]` of vec4<f16>, rows RS = BK / 4 + 2 vec4s apart (80 or 144 bytes): a coop
//   load reads 8 rows of 16 bytes, and rows that far apart start in 8 distinct groups of 4
//   banks; every row and every 16-input part starts 16-byte aligned. 64 inputs a barrier
//   halve the barriers and double the work each prefetch covers (docs/PERF.md, D-dense-bk64)
//   where workgroup memory and the staging registers hold them.
// - Subgroup s owns FR x FT accumulators: rows 16 FR (s % SG_R) .., tokens 16 FT (s / SG_R) ..
// - Output as matmul_coop.wgsl: whole tiles of one output with the identity epilogue store
//   straight into y, others through a 16 x 16 scratch of the subgroup and `y_out`. With
//   `accumulate` the product is added into y: whole tiles start their sums from y's values
//   (loaded into the accumulators), the others add y's value to the finished output.
// Precision: as matmul_coop.wgsl (the same f16 inputs: an F16 weight is exact in f16, and the
// inputs are rounded once), f32 sums on the tensor cores.

override TM: u32 = 128u;
override TN: u32 = 128u;
// Accumulator blocks of 16 along the rows and the tokens of one subgroup; SG_R subgroups
// along the rows, 8 / SG_R along the tokens.
override FR: u32 = 2u;
override FT: u32 = 4u;
override SG_R: u32 = TM / (16u * FR);
override WG: u32 = 256u;
// Tiles in workgroup memory: 1 (stage, barrier, multiply, barrier) or 2 (multiply one while
// the next is stored into the other: one barrier a unit).
override STAGES: u32 = 1u;
// Inputs per barrier (the host's DenseTile::inputs_per_barrier): 32 or 64.
override BK: u32 = 32u;
// Inputs of X a 16-byte load: 4 f32s, or 8 f16s (the host's DenseInput).
override X_PER_LOAD: u32 = 4u;
// A tile row: BK / 4 vec4s and 2 of padding.
override RS: u32 = BK / 4u + 2u;

override WS_STAGE: u32 = TM * RS;
override XS_STAGE: u32 = TN * RS;
override WS_LEN: u32 = STAGES * WS_STAGE;
override XS_LEN: u32 = STAGES * XS_STAGE;
override CS_LEN: u32 = WG * 8u;
var<workgroup> ws: array<vec4<f16>, WS_LEN>;
var<workgroup> xs: array<vec4<f16>, XS_LEN>;
var<workgroup> cs: array<f32, CS_LEN>;

// X as 16-byte pieces: 4 f32s or 8 f16s as X_PER_LOAD says (params.wgsl leaves X to each
// kernel).
@group(0) @binding(2) var<storage, read> x: array<vec4<u32>>;

// Registers of one unit's staging, as loaded: up to 4 weight pieces and 8 input pieces an
// invocation (TM * BK / 8 and TN * BK / X_PER_LOAD at most 4 and 8 times WG). Named fields, not
// arrays: a private array indexed in a loop may live in local memory.
struct Staged {
    w0: vec4<u32>, w1: vec4<u32>, w2: vec4<u32>, w3: vec4<u32>,
    x0: vec4<u32>, x1: vec4<u32>, x2: vec4<u32>, x3: vec4<u32>,
    x4: vec4<u32>, x5: vec4<u32>, x6: vec4<u32>, x7: vec4<u32>,
}

// Piece m of this invocation's share of the weights of the unit from input k0; rows past the
// chunk and inputs past k_end read in bounds and stage zeros.
fn load_w(row0: u32, k0: u32, tid: u32, m: u32, k_end: u32) -> vec4<u32> {
    let i = tid + WG * m;
    let q = BK / 8u;
    let r = row0 + i / q;
    let k = k0 + 8u * (i % q);
    let at = (w_row(min(r, p.n_rows - 1u)) * p.row_bytes + 2u * min(k, p.n_in - 8u)) / 16u;
    return select(vec4<u32>(0u), w[at], r < p.n_rows && k < k_end);
}

// Piece m of this invocation's share of the inputs of the unit from input k0 (X_PER_LOAD
// inputs of one token); tokens past the last and inputs past k_end read in bounds and stage
// zeros (whose bits are zeros in f32 and in f16).
fn load_x(tok0: u32, k0: u32, tid: u32, m: u32, k_end: u32) -> vec4<u32> {
    let i = tid + WG * m;
    let q = BK / X_PER_LOAD;
    let t = tok0 + i / q;
    let k = k0 + X_PER_LOAD * (i % q);
    let at = p.x_offset + min(t, p.n_tokens - 1u) * p.x_stride + min(k, p.n_in - X_PER_LOAD);
    return select(vec4<u32>(0u), x[at / X_PER_LOAD], t < p.n_tokens && k < k_end);
}

override NW: u32 = TM * BK / 8u / WG;
override NX: u32 = TN * BK / X_PER_LOAD / WG;

// The staging of the unit from input u.
fn load_unit(row0: u32, tok0: u32, u: u32, tid: u32, k_end: u32) -> Staged {
    var s: Staged;
    s.w0 = load_w(row0, u, tid, 0u, k_end);
    if NW > 1u { s.w1 = load_w(row0, u, tid, 1u, k_end); }
    if NW > 2u { s.w2 = load_w(row0, u, tid, 2u, k_end); s.w3 = load_w(row0, u, tid, 3u, k_end); }
    s.x0 = load_x(tok0, u, tid, 0u, k_end);
    if NX > 1u { s.x1 = load_x(tok0, u, tid, 1u, k_end); }
    if NX > 2u { s.x2 = load_x(tok0, u, tid, 2u, k_end); s.x3 = load_x(tok0, u, tid, 3u, k_end); }
    if NX > 4u {
        s.x4 = load_x(tok0, u, tid, 4u, k_end); s.x5 = load_x(tok0, u, tid, 5u, k_end);
        s.x6 = load_x(tok0, u, tid, 6u, k_end); s.x7 = load_x(tok0, u, tid, 7u, k_end);
    }
    return s;
}

// The weights go through f32 (unpack2x16float), exactly: naga 30 rejects the bitcast of two
// words to vec4<f16> that would keep them in f16.
fn store_w(q: vec4<u32>, tid: u32, m: u32, stage: u32) {
    let i = tid + WG * m;
    let at = stage * WS_STAGE + (i / (BK / 8u)) * RS + 2u * (i % (BK / 8u));
    ws[at] = vec4<f16>(vec4<f32>(unpack2x16float(q.x), unpack2x16float(q.y)));
    ws[at + 1u] = vec4<f16>(vec4<f32>(unpack2x16float(q.z), unpack2x16float(q.w)));
}

// An input piece rounded to f16 (f32 inputs) or as it is (f16: through f32, exactly), at its
// place in the input tile.
fn store_x(v: vec4<u32>, tid: u32, m: u32, stage: u32) {
    let i = tid + WG * m;
    let q = BK / X_PER_LOAD;
    let at = stage * XS_STAGE + (i / q) * RS + (X_PER_LOAD / 4u) * (i % q);
    if X_PER_LOAD == 8u {
        xs[at] = vec4<f16>(vec4<f32>(unpack2x16float(v.x), unpack2x16float(v.y)));
        xs[at + 1u] = vec4<f16>(vec4<f32>(unpack2x16float(v.z), unpack2x16float(v.w)));
    } else {
        xs[at] = vec4<f16>(bitcast<vec4<f32>>(v));
    }
}

fn store_unit(s: Staged, tid: u32, stage: u32) {
    store_w(s.w0, tid, 0u, stage);
    if NW > 1u { store_w(s.w1, tid, 1u, stage); }
    if NW > 2u { store_w(s.w2, tid, 2u, stage); store_w(s.w3, tid, 3u, stage); }
    store_x(s.x0, tid, 0u, stage);
    if NX > 1u { store_x(s.x1, tid, 1u, stage); }
    if NX > 2u { store_x(s.x2, tid, 2u, stage); store_x(s.x3, tid, 3u, stage); }
    if NX > 4u {
        store_x(s.x4, tid, 4u, stage); store_x(s.x5, tid, 5u, stage);
        store_x(s.x6, tid, 6u, stage); store_x(s.x7, tid, 7u, stage);
    }
}

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(local_invocation_index) tid: u32,
) {
    let row0 = wid.x * TM;
    let tok0 = wid.y * TN;
    let sg = tid / 32u;
    let lane = tid % 32u;
    coop_lane(lane);
    let a_base = 16u * FR * (sg % SG_R) * RS;
    let b_base = 16u * FT * (sg / SG_R) * RS;
    var c00 = MatC(); var c01 = MatC(); var c02 = MatC(); var c03 = MatC();
    var c10 = MatC(); var c11 = MatC(); var c12 = MatC(); var c13 = MatC();
    var c20 = MatC(); var c21 = MatC(); var c22 = MatC(); var c23 = MatC();
    var c30 = MatC(); var c31 = MatC(); var c32 = MatC(); var c33 = MatC();

    // Inputs k_begin .. k_end (split K's share, in units of 32), in units of BK from the
    // first; a unit's inputs past k_end stage zeros.
    var k_begin = 0u;
    var k_end = p.n_in;
    if p.k_units > 0u {
        k_begin = min(wid.z * p.k_units * 32u, p.n_in);
        k_end = min(k_begin + p.k_units * 32u, p.n_in);
    }
    // k_begin is a multiple of 32, not always of BK: units count from it.
    let u_begin = 0u;
    let u_end = (k_end - k_begin + BK - 1u) / BK;
    let y0 = p.y_offset + wid.z * p.k_slice;
    // Whole tiles of one output with the identity epilogue go straight to y (and, adding
    // into it, start their sums from it); the others through the scratch.
    let r0 = row0 + 16u * FR * (sg % SG_R);
    let t0 = tok0 + 16u * FT * (sg / SG_R);
    let tile = y_tile(row0, row0 + TM - 1u, vec2<u32>(y0, p.y_stride));
    let whole = Y_OUT_IDENTITY && tile.z == 1u && row0 + TM <= p.n_rows
        && tok0 + TN <= p.n_tokens && tile.x % 4u == 0u && tile.y % 4u == 0u;
    let ys = tile.y;
    let at = tile.x + t0 * ys + r0;
    if whole && p.accumulate != 0u {
        c00 = load_y(at, ys);
        c01 = load_y(at + 16u * ys, ys);
        c10 = load_y(at + 16u, ys);
        c11 = load_y(at + 16u * ys + 16u, ys);
        if FT == 4u {
            c02 = load_y(at + 32u * ys, ys);
            c03 = load_y(at + 48u * ys, ys);
            c12 = load_y(at + 32u * ys + 16u, ys);
            c13 = load_y(at + 48u * ys + 16u, ys);
            if FR == 4u {
                c20 = load_y(at + 32u, ys);
                c21 = load_y(at + 16u * ys + 32u, ys);
                c22 = load_y(at + 32u * ys + 32u, ys);
                c23 = load_y(at + 48u * ys + 32u, ys);
                c30 = load_y(at + 48u, ys);
                c31 = load_y(at + 16u * ys + 48u, ys);
                c32 = load_y(at + 32u * ys + 48u, ys);
                c33 = load_y(at + 48u * ys + 48u, ys);
            }
        }
    }
    var staged = load_unit(row0, tok0, k_begin, tid, k_end);
    if STAGES == 2u {
        store_unit(staged, tid, 0u);
        workgroupBarrier();
    }
    for (var u = u_begin; u < u_end; u++) {
        var stage = 0u;
        if STAGES == 1u {
            store_unit(staged, tid, 0u);
            workgroupBarrier();
        } else {
            stage = (u - u_begin) % 2u;
        }
        if u + 1u < u_end {
            staged = load_unit(row0, tok0, k_begin + BK * (u + 1u), tid, k_end);
        }
        let a_at = stage * WS_STAGE + a_base;
        let b_at = stage * XS_STAGE + b_base;
        for (var h = 0u; h < BK / 16u; h++) {
            let a0 = load_a(a_at + 4u * h);
            let a1 = load_a(a_at + 16u * RS + 4u * h);
            let b0 = load_b(b_at + 4u * h);
            let b1 = load_b(b_at + 16u * RS + 4u * h);
            c00 = mma(a0, b0, c00);
            c01 = mma(a0, b1, c01);
            c10 = mma(a1, b0, c10);
            c11 = mma(a1, b1, c11);
            if FT == 4u {
                let b2 = load_b(b_at + 32u * RS + 4u * h);
                let b3 = load_b(b_at + 48u * RS + 4u * h);
                c02 = mma(a0, b2, c02);
                c03 = mma(a0, b3, c03);
                c12 = mma(a1, b2, c12);
                c13 = mma(a1, b3, c13);
                if FR == 4u {
                    let a2 = load_a(a_at + 32u * RS + 4u * h);
                    let a3 = load_a(a_at + 48u * RS + 4u * h);
                    c20 = mma(a2, b0, c20);
                    c21 = mma(a2, b1, c21);
                    c22 = mma(a2, b2, c22);
                    c23 = mma(a2, b3, c23);
                    c30 = mma(a3, b0, c30);
                    c31 = mma(a3, b1, c31);
                    c32 = mma(a3, b2, c32);
                    c33 = mma(a3, b3, c33);
                }
            }
        }
        if STAGES == 2u && u + 1u < u_end {
            // The other stage was last read before the previous barrier.
            store_unit(staged, tid, 1u - stage);
        }
        workgroupBarrier();
    }

    if whole {
        store_y(c00, at, ys);
        store_y(c01, at + 16u * ys, ys);
        store_y(c10, at + 16u, ys);
        store_y(c11, at + 16u * ys + 16u, ys);
        if FT == 4u {
            store_y(c02, at + 32u * ys, ys);
            store_y(c03, at + 48u * ys, ys);
            store_y(c12, at + 32u * ys + 16u, ys);
            store_y(c13, at + 48u * ys + 16u, ys);
            if FR == 4u {
                store_y(c20, at + 32u, ys);
                store_y(c21, at + 16u * ys + 32u, ys);
                store_y(c22, at + 32u * ys + 32u, ys);
                store_y(c23, at + 48u * ys + 32u, ys);
                store_y(c30, at + 48u, ys);
                store_y(c31, at + 16u * ys + 48u, ys);
                store_y(c32, at + 32u * ys + 48u, ys);
                store_y(c33, at + 48u * ys + 48u, ys);
            }
        }
    } else {
        let scratch = 256u * sg;
        store_partial(c00, scratch, lane, r0, t0, y0);
        store_partial(c01, scratch, lane, r0, t0 + 16u, y0);
        store_partial(c10, scratch, lane, r0 + 16u, t0, y0);
        store_partial(c11, scratch, lane, r0 + 16u, t0 + 16u, y0);
        if FT == 4u {
            store_partial(c02, scratch, lane, r0, t0 + 32u, y0);
            store_partial(c03, scratch, lane, r0, t0 + 48u, y0);
            store_partial(c12, scratch, lane, r0 + 16u, t0 + 32u, y0);
            store_partial(c13, scratch, lane, r0 + 16u, t0 + 48u, y0);
            if FR == 4u {
                store_partial(c20, scratch, lane, r0 + 32u, t0, y0);
                store_partial(c21, scratch, lane, r0 + 32u, t0 + 16u, y0);
                store_partial(c22, scratch, lane, r0 + 32u, t0 + 32u, y0);
                store_partial(c23, scratch, lane, r0 + 32u, t0 + 48u, y0);
                store_partial(c30, scratch, lane, r0 + 48u, t0, y0);
                store_partial(c31, scratch, lane, r0 + 48u, t0 + 16u, y0);
                store_partial(c32, scratch, lane, r0 + 48u, t0 + 32u, y0);
                store_partial(c33, scratch, lane, r0 + 48u, t0 + 48u, y0);
            }
        }
    }
}
