// The training attention's backward, dk and dv, on the tensor cores (with
// attention/train_params.wgsl, attention/train_coop_rows.wgsl,
// attention/train_backward_coop_inputs.wgsl and the loads and stores of
// attention/coop_io.wgsl, or in the tests' emulation attention/coop_io_emul.wgsl):
// attention/train_backward_dkdv.wgsl's contract (dk and dv, or with p.pair_splits > 1 each
// split's partial sums in its slices) for dk = dv = HD, with q, k, v, do, P and ds rounded to
// f16.
//
// One workgroup of 256 invocations = 8 subgroups of 32 per (tile of KT = 32 key rows of one kv
// head, split of its pairs). The transposed scores put the keys on the A side: subgroup s holds
// K (s even) or V (s odd) of key tile (s / 2) % 2 over its half s / 4 of the dims, staged once
// through `tile` (a quarter of the dims at a time, every subgroup's rows side by side) and held
// as HD / 32 A operands. 32 key rows, not 64: a workgroup's dK and dV accumulators are
// 2 x KT x HD f32, at 64 keys and HD 256 128 registers an invocation on top of the 64 of the
// held K and V (64 keys x HD, twice), past what an invocation holds without spilling; at 32
// the accumulators take 64 and the held rows 32.
//
// It walks the (row, head) pairs that may see its keys in blocks of BP = 16, their q (rows
// 0..15) and do times DO_SCALE (16..31) staged as f16, D = do . o summed in f32 from the f32
// rows on the way (16 invocations a pair) and each pair's lse. Subgroup s computes its half of
// the dims of the 16 x 16 tile S^T = K Q^T (s even) or dP^T = V dO^T (s odd) of its key tile
// into `scores`; the plain code adds the halves, takes P = exp(S - lse) and ds = P (dP - D)
// cap' with the f32 kernel's masks, window, soft-cap and scale (invocation t: key t % 32,
// pairs 4 ((t / 32) % 4) .. + 3, P for t < 128 and ds above) and stores P^T and ds^T as f16
// in `wt`; then dV += P^T dO and dK += ds^T Q, subgroup s owning key tile s % 2 of dK (s / 2
// even) or dV (odd) over its half s / 4 of the dims (HD / 32 accumulators). Four barriers a
// block (the pairs staged; S^T and dP^T stored; P^T and ds^T written; dK and dV done), each
// staged pair feeding 32 keys. Each block's global reads overlap the products before it: an
// invocation loads its share of the next block (q, do, its part of D, lse) into registers
// before the score products and stores it after the barrier that frees workgroup memory.
// Workgroup memory at HD 256: `tile` 16.5 KiB, `scores` 8 KiB, `wt` 2.5 KiB, D's parts 1 KiB,
// under lavapipe's 32 KiB.
//
// Scale of do: a loss averaged over thousands of tokens gives do (and ds, linear in do) far
// below f16's smallest normal, 2^-14, where f16 loses bits or flushes to zero. do is staged
// multiplied by DO_SCALE = 2^8 (exact in binary), D likewise, so dP, ds and both accumulators
// carry the factor, taken off (exactly) when they are written. f16 then keeps full precision
// for |do| and |ds| down to 2^-22 and overflows (65504) past 256: a middle between the
// gradients of a mean over thousands of tokens (kept among the normals) and those of a few
// tokens (kept far from overflow); `--no-tensor-cores` runs the exact f32 kernels.

@group(0) @binding(8) var<storage, read_write> dk_out: array<f32>;
@group(0) @binding(9) var<storage, read_write> dv_out: array<f32>;

// Must be 256 (8 subgroups of 32: `Caps::coop_f16` holds only where the subgroup is 32 wide).
override WG: u32 = 256u;
// Head dimension (dk = dv): 64, 128 or 256.
override HD: u32 = 128u;
// Key rows a workgroup (two key tiles).
const KT: u32 = 32u;
// Pairs a block (one pair tile).
const BP: u32 = 16u;
// Column stride of `scores` (a column: a tile's 16 key rows).
const SC: u32 = 16u;
// Row stride of `tile` holding a block's q and do, in vec4<f16> (HD values + 8 of padding):
// rows 16-byte aligned, consecutive rows in different banks.
override RS: u32 = HD / 4u + 2u;
// Row stride of `tile` holding a quarter of the dims of the held K and V rows (no padding:
// 128 padded rows would not fit, and they are loaded once).
override QS: u32 = HD / 16u;
// Row stride of `wt` in vec4<f16> (16 pairs of P^T, 16 of ds^T, 8 of padding).
const RW: u32 = 10u;

// A block's q (rows 0..15) and do (16..31), HD values a row; or a quarter of the dims of the
// held rows (row 16 s + r: subgroup s's row r).
var<workgroup> tile: array<vec4<f16>, 2112>; // 32 * RS at HD 256
// The subgroups' halves of the score tiles (subgroup s's at 256 s, column-major: key row r,
// pair c at 16 c + r), and the accumulators on their way out (eight 16 x 16 tiles).
var<workgroup> scores: array<f32, 2048>;
// The block's weights, 32 keys x (16 pairs of P^T, then 16 of ds^T).
var<workgroup> wt: array<vec4<f16>, 320>;
// Each staging invocation's share of its pair's D (pair r's at 16 r .. 16 r + 15).
var<workgroup> d_parts: array<f32, 256>;
// The block's pairs' D (times DO_SCALE) and log-sum-exp.
var<workgroup> pair_d: array<f32, 16>;
var<workgroup> pair_lse: array<f32, 16>;
// The rows that may see the tile's keys (x); a vec4 so that every workgroup variable is a
// multiple of 16 bytes.
var<workgroup> range_s: vec4<u32>;
// This invocation's share of the next block: vec4s x = tid % 16 + 16 u of pair tid / 16's q
// and do (times DO_SCALE), its part of the pair's D, and the pair's lse.
var<private> staged_q: array<vec4<f16>, 4>;
var<private> staged_do: array<vec4<f16>, 4>;
var<private> staged_d: f32;
var<private> staged_lse: f32;

// `tile` from dims x HD / 4 .. + HD / 4 of each subgroup's half of the dims of its held rows
// (k or v of its key tile, zeros past the block), QS vec4s a row.
fn stage_held_quarter(g: u32, j0: u32, x: u32, tid: u32) {
    for (var i = tid; i < 8u * 16u * QS; i += WG) {
        let s = i / (16u * QS);
        let j = j0 + 16u * ((s / 2u) % 2u) + (i / QS) % 16u;
        var a = vec4<f32>(0.0);
        if j < p.n {
            let at = (j * p.n_kv + g) * HD + (s / 4u) * (HD / 2u) + x * (HD / 4u) + 4u * (i % QS);
            if s % 2u == 0u {
                a = k4(p.k_offset + at);
            } else {
                a = v4(p.v_offset + at);
            }
        }
        tile[i] = vec4<f16>(a);
    }
}

// This invocation's share of the pairs e0 .. e0 + 15 of kv head g into the `staged_*`
// registers (zeros past the pairs before e_end).
fn load_pairs(g: u32, e0: u32, e_end: u32, tid: u32) {
    let e = e0 + tid / 16u;
    let inside = e < e_end;
    var row = 0u;
    if inside {
        row = pair_row(g, e);
    }
    // The HD / 64 shares by constant index (attention/coop_stage.wgsl's reason).
    var part = load_pair_share(row, inside, tid, 0u);
    if HD >= 128u {
        part += load_pair_share(row, inside, tid, 1u);
    }
    if HD >= 256u {
        part += load_pair_share(row, inside, tid, 2u);
        part += load_pair_share(row, inside, tid, 3u);
    }
    staged_d = part;
    staged_lse = 0.0;
    if inside && tid % 16u == 0u {
        staged_lse = lse[p.lse_offset + row];
    }
}

// Share u of load_pairs' (dims 4 (tid % 16 + 16 u) .. + 3 of the pair at `row`): q and do
// into `staged_*`, and this share's part of D = do . o.
fn load_pair_share(row: u32, inside: bool, tid: u32, u: u32) -> f32 {
    let at = row * HD + 4u * (tid % 16u + 16u * u);
    var a = vec4<f32>(0.0);
    var d = vec4<f32>(0.0);
    var part = 0.0;
    if inside {
        a = q4(p.q_offset + at);
        d = do4(p.do_offset + at);
        part = dot(d, o4(p.o_offset + at));
    }
    staged_q[u] = vec4<f16>(a);
    staged_do[u] = vec4<f16>(d * DO_SCALE);
    return part;
}

// The `staged_*` registers into `tile`, `d_parts` and `pair_lse` (after a barrier that frees
// them).
fn store_pairs(tid: u32) {
    let r = tid / 16u;
    store_pair_share(r, tid, 0u);
    if HD >= 128u {
        store_pair_share(r, tid, 1u);
    }
    if HD >= 256u {
        store_pair_share(r, tid, 2u);
        store_pair_share(r, tid, 3u);
    }
    d_parts[tid] = staged_d;
    if tid % 16u == 0u {
        pair_lse[r] = staged_lse;
    }
}

// Share u of the `staged_*` registers into `tile`.
fn store_pair_share(r: u32, tid: u32, u: u32) {
    let x = tid % 16u + 16u * u;
    tile[r * RS + x] = staged_q[u];
    tile[(BP + r) * RS + x] = staged_do[u];
}

// Subgroup sg's half of the dims of its 16 x 16 tile of S^T (sg even) or dP^T (odd), before
// the scale: its held rows (`aXc`: the half's dims X HD / 4 + 16 c .., HD / 64 of each quarter
// used) times the block's q rows (or do rows) of `tile` as B, into `scores`.
fn score_half(
    a00: MatA, a01: MatA, a02: MatA, a03: MatA, a10: MatA, a11: MatA, a12: MatA, a13: MatA,
    sg: u32,
) {
    let at = BP * (sg % 2u) * RS + (sg / 4u) * (HD / 8u);
    let x = HD / 16u;
    var s = MatC();
    s = mma(a00, load_bt(at), s);
    s = mma(a10, load_bt(at + x), s);
    if HD >= 128u {
        s = mma(a01, load_bt(at + 4u), s);
        s = mma(a11, load_bt(at + x + 4u), s);
    }
    if HD >= 256u {
        s = mma(a02, load_bt(at + 8u), s);
        s = mma(a12, load_bt(at + x + 8u), s);
        s = mma(a03, load_bt(at + 12u), s);
        s = mma(a13, load_bt(at + x + 12u), s);
    }
    store_scores(s, 256u * sg);
}

// Entry (key row r of key tile kt, block pair c) of S^T (`dp`: of dP^T) from the subgroups'
// halves.
fn score_sum(kt: u32, dp: bool, r: u32, c: u32) -> f32 {
    let at = 256u * (2u * kt + select(0u, 1u, dp)) + SC * c + r;
    return scores[at] + scores[at + 1024u];
}

// Entry (key j = key row r of key tile kt, block pair c) of P^T (`ds`: of ds^T times
// DO_SCALE), pairs from e0; zero where the pair does not see the key or lies past `e_end`.
fn weight(e0: u32, c: u32, j: u32, kt: u32, r: u32, e_end: u32, ds: bool) -> f32 {
    let e = e0 + c;
    let me = sight(e);
    if !(me.valid && e < e_end && j >= me.first && j <= me.i) {
        return 0.0;
    }
    let sc = score(p.scale * score_sum(kt, false, r, c));
    let pr = exp(sc.s - pair_lse[c]);
    if !ds {
        return pr;
    }
    return pr * (score_sum(kt, true, r, c) - pair_d[c]) * sc.grad;
}

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) tid: u32,
) {
    let sg = tid / 32u;
    coop_lane(tid % 32u);
    let blocks = (p.n + KT - 1u) / KT;
    let idx = group_index(wid, nwg);
    if idx >= blocks * p.n_kv {
        return;
    }
    let g = idx / blocks;
    let j0 = (idx % blocks) * KT;
    let j_last = min(j0 + KT, p.n) - 1u;
    let split = wid.z;
    stage_held_quarter(g, j0, 0u, tid);
    // The rows that may see the tile's keys: from j0 to the end of j_last's sequence (the
    // first row whose sequence starts after j_last, by bisection as the f32 kernel).
    if tid == 0u {
        var lo_i = j_last + 1u;
        var end = p.n;
        while lo_i < end {
            let mid = (lo_i + end) / 2u;
            if start[p.start_offset + mid] > j_last {
                end = mid;
            } else {
                lo_i = mid + 1u;
            }
        }
        range_s = vec4<u32>(end, 0u, 0u, 0u);
    }
    // Uniform for the loop's barriers (start[] is a storage read); also the barrier after
    // the first quarter of the held rows.
    var row_end = workgroupUniformLoad(&range_s).x;
    if p.window > 0u {
        row_end = min(row_end, j_last + p.window);
    }
    let e_span = split_share(j0 * group_size(), row_end * group_size(), BP, p.pair_splits, split);
    // The subgroup's held rows, 16 dims an operand (those past HD / 64 a quarter are never
    // read).
    let ha = 16u * sg * QS;
    let a00 = load_held(ha);
    let a01 = load_held(ha + 4u);
    let a02 = load_held(ha + 8u);
    let a03 = load_held(ha + 12u);
    workgroupBarrier();
    stage_held_quarter(g, j0, 1u, tid);
    workgroupBarrier();
    let a10 = load_held(ha);
    let a11 = load_held(ha + 4u);
    let a12 = load_held(ha + 8u);
    let a13 = load_held(ha + 12u);
    if e_span.x < e_span.y {
        load_pairs(g, e_span.x, e_span.y, tid);
    }
    // k and v are held: `tile` may take the pairs.
    workgroupBarrier();

    // Plain-code role: key j0 + rk (row r of key tile kt), pairs 4 c4 .. 4 c4 + 3 of each
    // block; invocations 0..127 store P^T, 128..255 ds^T.
    let rk = tid % KT;
    let kt = rk / 16u;
    let r = rk % 16u;
    let j = j0 + rk;
    let c4 = (tid / KT) % 4u;
    let ds_half = tid >= 128u;
    // The subgroup's products: key tile sg % 2 of dK (P^T's ds half, q rows) or dV (P^T, do
    // rows), its half sg / 4 of the dims.
    let to_v = (sg / 2u) % 2u;
    let wa = 16u * (sg % 2u) * RW + 4u * (1u - to_v);
    let ba = BP * to_v * RS + (sg / 4u) * (HD / 8u);

    var acc0 = MatC();
    var acc1 = MatC();
    var acc2 = MatC();
    var acc3 = MatC();
    var acc4 = MatC();
    var acc5 = MatC();
    var acc6 = MatC();
    var acc7 = MatC();
    for (var e0 = e_span.x; e0 < e_span.y; e0 += BP) {
        store_pairs(tid);
        workgroupBarrier();
        if e0 + BP < e_span.y {
            load_pairs(g, e0 + BP, e_span.y, tid);
        }
        if tid < BP {
            let at = 16u * tid;
            var d = 0.0;
            for (var x = 0u; x < 16u; x++) {
                d += d_parts[at + x];
            }
            pair_d[tid] = d * DO_SCALE;
        }
        score_half(a00, a01, a02, a03, a10, a11, a12, a13, sg);
        workgroupBarrier();
        let c = 4u * c4;
        let w = vec4<f32>(
            weight(e0, c, j, kt, r, e_span.y, ds_half),
            weight(e0, c + 1u, j, kt, r, e_span.y, ds_half),
            weight(e0, c + 2u, j, kt, r, e_span.y, ds_half),
            weight(e0, c + 3u, j, kt, r, e_span.y, ds_half),
        );
        wt[rk * RW + select(0u, 4u, ds_half) + c4] = vec4<f16>(w);
        workgroupBarrier();
        let a = load_w(wa);
        acc0 = mma(a, load_b_rows(ba), acc0);
        acc1 = mma(a, load_b_rows(ba + 4u), acc1);
        if HD >= 128u {
            acc2 = mma(a, load_b_rows(ba + 8u), acc2);
            acc3 = mma(a, load_b_rows(ba + 12u), acc3);
        }
        if HD >= 256u {
            acc4 = mma(a, load_b_rows(ba + 16u), acc4);
            acc5 = mma(a, load_b_rows(ba + 20u), acc5);
            acc6 = mma(a, load_b_rows(ba + 24u), acc6);
            acc7 = mma(a, load_b_rows(ba + 28u), acc7);
        }
        workgroupBarrier();
    }

    put_rows(acc0, 0u, sg, tid, g, j0, split);
    put_rows(acc1, 16u, sg, tid, g, j0, split);
    if HD >= 128u {
        put_rows(acc2, 32u, sg, tid, g, j0, split);
        put_rows(acc3, 48u, sg, tid, g, j0, split);
    }
    if HD >= 256u {
        put_rows(acc4, 64u, sg, tid, g, j0, split);
        put_rows(acc5, 80u, sg, tid, g, j0, split);
        put_rows(acc6, 96u, sg, tid, g, j0, split);
        put_rows(acc7, 112u, sg, tid, g, j0, split);
    }
}

// Accumulator `acc` (dims dt .. dt + 15 of each subgroup's half) into dk_out or dv_out (split
// `split`'s slices), the key rows inside, through `scores` (tile sg at 256 sg, row-major): tile
// t is key tile t % 2 of dK (t / 2 even, times scale / DO_SCALE) or dV (odd, / DO_SCALE), dims
// (t / 4) HD / 2 ... Called by every invocation in uniform control flow (it holds barriers).
fn put_rows(acc: MatC, dt: u32, sg: u32, tid: u32, g: u32, j0: u32, split: u32) {
    store_rows(acc, 256u * sg);
    workgroupBarrier();
    let slice = split * p.n * p.n_kv * HD;
    for (var u = 0u; u < 8u; u++) {
        let i = tid + WG * u;
        let t = i / 256u;
        let j = j0 + 16u * (t % 2u) + (i % 256u) / 16u;
        if j < p.n {
            let at = slice + (j * p.n_kv + g) * HD + (t / 4u) * (HD / 2u) + dt + i % 16u;
            if (t / 2u) % 2u == 1u {
                dv_out[p.dv_offset + at] = scores[i] / DO_SCALE;
            } else {
                dk_out[p.dk_offset + at] = scores[i] * (p.scale / DO_SCALE);
            }
        }
    }
    workgroupBarrier();
}
