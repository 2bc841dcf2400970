// The training attention's backward, dk and dv, on the tensor cores (with
// attention/train_coop_tiles.wgsl and attention/train_params.wgsl): attention/train_backward_dkdv.wgsl's
// contract (dk and dv, or with p.pair_splits > 1 each split's partial sums in its slices) for
// dk = dv = HD, with q, k, v, do, P and ds rounded to f16.
//
// One workgroup per (tile of 16 key rows of one kv head, split of its pairs). The transposed
// scores put the keys on the A side: K and V of the tile are staged once (K in `tile` rows
// 0..15, V in 16..31) and held as A operands, subgroup s holding K (s even) or V (s odd) over
// its half s / 2 of the dims. It walks the (row, head) pairs that may see its keys in blocks of
// 16, staging their q (rows 0..15) and do (rows 16..31) as f16; `score_part` then gives
// S^T = K Q^T (subgroups 0, 2) and dP^T = V dO^T (1, 3). The plain code takes P = exp(S - lse)
// and ds = P (dP - D) cap' with the f32 kernel's masks, window, soft-cap and scale, D = do . o
// summed in f32 while do is staged, and stores P^T and ds^T as f16 in `wt`; then dV += P^T dO
// and dK += ds^T Q, subgroup s owning dims s HD / 4 .. (s + 1) HD / 4 of both.
//
// Scale of do: a loss averaged over thousands of tokens gives do (and ds, linear in do) far
// below f16's smallest normal, 2^-14, where f16 loses bits or flushes to zero. do is staged
// multiplied by DO_SCALE = 2^8 (exact in binary), D likewise, so dP, ds and both accumulators
// carry the factor, taken off (exactly) when they are written. f16 then keeps full precision
// for |do| and |ds| down to 2^-22 and overflows (65504) past 256: a middle between the
// gradients of a mean over thousands of tokens (kept among the normals) and those of a few
// tokens (kept far from overflow); `--no-tensor-cores` runs the exact f32 kernels.

// Inputs, do's scale, the pairs' staging: attention/train_backward_coop_pairs.wgsl.
@group(0) @binding(8) var<storage, read_write> dk_out: array<f32>;
@group(0) @binding(9) var<storage, read_write> dv_out: array<f32>;

// Row stride of `wt` in vec4<f16> (32 weights + 8 of padding).
const RW: u32 = 10u;

// The block's weights, 16 keys x (16 pairs of P^T, then 16 of ds^T).
var<workgroup> wt: array<vec4<f16>, 160>;

// Entry (key j, block pair c) of P^T (`ds`: of ds^T times DO_SCALE) from the block's partial
// products, pairs from e0; zero where the pair does not see the key or lies past `e_end`.
fn weight(e0: u32, c: u32, j: u32, e_end: u32, ds: bool) -> f32 {
    let e = e0 + c;
    let me = sight(e);
    let r = j % TR;
    if !(me.valid && e < e_end && j >= me.first && j <= me.i) {
        return 0.0;
    }
    let sc = score(p.scale * part_sum(0u, r, c));
    let pr = exp(sc.s - pair_lse[c]);
    if !ds {
        return pr;
    }
    return pr * (part_sum(1u, r, c) - pair_delta(c)) * sc.grad;
}

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) tid: u32,
) {
    let sg = tid / 32u;
    coop_lane(tid % 32u);
    let blocks = (p.n + TR - 1u) / TR;
    let idx = group_index(wid, nwg);
    if idx >= blocks * p.n_kv {
        return;
    }
    let g = idx / blocks;
    let j0 = (idx % blocks) * TR;
    let j_last = min(j0 + TR, p.n) - 1u;
    let split = wid.z;
    stage_keys(g, j0, 0u, TR, false, tid);
    stage_keys(g, j0, TR, TR, true, tid);
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
    // k and v.
    var row_end = workgroupUniformLoad(&range_s).x;
    if p.window > 0u {
        row_end = min(row_end, j_last + p.window);
    }
    let e_span = split_share(j0 * group_size(), row_end * group_size(), TR, p.pair_splits, split);
    // This subgroup's operand (k or v) and half of the dims.
    let t = sg % 2u;
    let dh = sg / 2u;
    let a0 = held(TR * t, dh, 0u);
    let a1 = held(TR * t, dh, 1u);
    let a2 = held(TR * t, dh, 2u);
    let a3 = held(TR * t, dh, 3u);
    let a4 = held(TR * t, dh, 4u);
    let a5 = held(TR * t, dh, 5u);
    let a6 = held(TR * t, dh, 6u);
    let a7 = held(TR * t, dh, 7u);
    // k and v are held: `tile` may take the pairs.
    workgroupBarrier();

    // Plain-code role: key j0 + r, pairs 4 c4 .. 4 c4 + 3 of each block; invocations 0..63
    // store P^T, 64..127 ds^T.
    let r = tid % TR;
    let j = j0 + r;
    let c4 = (tid / TR) % 4u;
    let ds_half = tid >= 64u;

    let d0 = sg * (HD / 4u);
    var k0 = MatC();
    var k1 = MatC();
    var k2 = MatC();
    var k3 = MatC();
    var v0 = MatC();
    var v1 = MatC();
    var v2 = MatC();
    var v3 = MatC();
    for (var e0 = e_span.x; e0 < e_span.y; e0 += TR) {
        stage_pairs(g, e0, tid);
        workgroupBarrier();
        score_part(a0, a1, a2, a3, a4, a5, a6, a7, TR * t, dh, sg);
        workgroupBarrier();
        let c = 4u * c4;
        let w = vec4<f32>(
            weight(e0, c, j, e_span.y, ds_half),
            weight(e0, c + 1u, j, e_span.y, ds_half),
            weight(e0, c + 2u, j, e_span.y, ds_half),
            weight(e0, c + 3u, j, e_span.y, ds_half),
        );
        wt[r * RW + select(0u, 4u, ds_half) + c4] = vec4<f16>(w);
        workgroupBarrier();
        let pw = load_w(0u);
        let dw = load_w(4u);
        let at = d0 / 4u;
        v0 = mma(pw, load_b_rows(TR * RS + at), v0);
        k0 = mma(dw, load_b_rows(at), k0);
        if HD >= 128u {
            v1 = mma(pw, load_b_rows(TR * RS + at + 4u), v1);
            k1 = mma(dw, load_b_rows(at + 4u), k1);
        }
        if HD >= 256u {
            v2 = mma(pw, load_b_rows(TR * RS + at + 8u), v2);
            k2 = mma(dw, load_b_rows(at + 8u), k2);
            v3 = mma(pw, load_b_rows(TR * RS + at + 12u), v3);
            k3 = mma(dw, load_b_rows(at + 12u), k3);
        }
        workgroupBarrier();
    }

    let dk_at = p.dk_offset + split * p.n * p.n_kv * HD;
    let dv_at = p.dv_offset + split * p.n * p.n_kv * HD;
    let kf = p.scale / DO_SCALE;
    let vf = 1.0 / DO_SCALE;
    put_rows(k0, 0u, false, kf, sg, tid, g, j0, dk_at);
    put_rows(v0, 0u, true, vf, sg, tid, g, j0, dv_at);
    if HD >= 128u {
        put_rows(k1, 16u, false, kf, sg, tid, g, j0, dk_at);
        put_rows(v1, 16u, true, vf, sg, tid, g, j0, dv_at);
    }
    if HD >= 256u {
        put_rows(k2, 32u, false, kf, sg, tid, g, j0, dk_at);
        put_rows(v2, 32u, true, vf, sg, tid, g, j0, dv_at);
        put_rows(k3, 48u, false, kf, sg, tid, g, j0, dk_at);
        put_rows(v3, 48u, true, vf, sg, tid, g, j0, dv_at);
    }
}

// Accumulator `acc` (dims dt .. dt + 15 of each subgroup's quarter), times `f`, into dv_out
// (`to_v`) or dk_out from `at`, the key rows inside, through `parts`. Called by every
// invocation in uniform control flow (it holds barriers).
fn put_rows(acc: MatC, dt: u32, to_v: bool, f: f32, sg: u32, tid: u32, g: u32, j0: u32, at: u32) {
    store_rows(acc, 256u * sg);
    workgroupBarrier();
    for (var u = 0u; u < 8u; u++) {
        let i = tid + WG * u;
        let j = j0 + (i % 256u) / 16u;
        if j < p.n {
            let dst = at + (j * p.n_kv + g) * HD + (i / 256u) * (HD / 4u) + dt + i % 16u;
            if to_v {
                dv_out[dst] = f * parts[i];
            } else {
                dk_out[dst] = f * parts[i];
            }
        }
    }
    workgroupBarrier();
}
