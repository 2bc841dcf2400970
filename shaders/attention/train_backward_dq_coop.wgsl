// The training attention's backward, dq, on the tensor cores (with
// attention/train_coop_tiles.wgsl and attention/train_params.wgsl): attention/train_backward_dq.wgsl's
// contract (dq, or with p.key_splits > 1 each split's partial sums in its slice) for
// dk = dv = HD, with q, k, v, do and ds rounded to f16.
//
// One workgroup per (tile of 16 (row, head) pairs of one kv head, split of its keys). The
// pairs' q (`tile` rows 0..15) and do (16..31) are staged once and held as A operands,
// subgroup s holding q (s even) or do (s odd) over its half s / 2 of the dims; D = do . o is
// summed in f32 while do is staged. It walks the keys its pairs see in blocks of 16, staging
// their k (rows 0..15) and v (rows 16..31) as f16; `score_part` then gives S = Q K^T
// (subgroups 0, 2) and dP = dO V^T (1, 3). The plain code takes ds = exp(S - lse) (dP - D)
// cap' with the f32 kernel's masks, window, soft-cap and scale and stores it as f16 in `wt`;
// then dQ += ds K, subgroup s owning dims s HD / 4 .. (s + 1) HD / 4.
//
// Scale of do: as attention/train_backward_dkdv_coop.wgsl's (its header says why): do is
// staged times DO_SCALE = 2^8, D likewise, so dP, ds and the accumulators carry the factor,
// taken off (exactly) when dq is written.

// Inputs, do's scale, the pairs' staging: attention/train_backward_coop_pairs.wgsl.
@group(0) @binding(8) var<storage, read_write> dq: array<f32>;

// Row stride of `wt` in vec4<f16> (16 weights + 8 of padding: rows 16-byte aligned).
const RW: u32 = 6u;

// The block's ds, 16 pairs x 16 keys (times DO_SCALE).
var<workgroup> wt: array<vec4<f16>, 96>;

// Entry (block pair r, block key c) of ds times DO_SCALE from the block's partial products,
// the block's keys from j0 (not a multiple of TR: the walk starts at the first key seen);
// zero where the pair (`me`) does not see the key.
fn ds_entry(me: Sight, r: u32, j0: u32, c: u32, li: f32, delta: f32) -> f32 {
    let j = j0 + c;
    if !(me.valid && j >= me.first && j <= me.i) {
        return 0.0;
    }
    let sc = score(p.scale * part_sum(0u, r, c));
    return exp(sc.s - li) * (part_sum(1u, r, c) - delta) * sc.grad;
}

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) tid: u32,
) {
    let sg = tid / 32u;
    coop_lane(tid % 32u);
    let pairs = pair_count();
    let pairs_tile = pair_tile(group_index(wid, nwg), TR);
    if !pairs_tile.valid {
        return;
    }
    let g = pairs_tile.g;
    let e0 = pairs_tile.e0;
    let split = wid.z;
    stage_pairs(g, e0, tid);
    if tid == 0u {
        let i0 = e0 / group_size();
        let hi = (min(e0 + TR, pairs) - 1u) / group_size() + 1u;
        range_s = vec4<u32>(first_key(i0, start[p.start_offset + i0]), hi, 0u, 0u);
    }
    // Uniform for the loop's barriers (start[] is a storage read); also the barrier after
    // the pairs' staging.
    let range = workgroupUniformLoad(&range_s);
    let keys = split_share(range.x, range.y, TR, p.key_splits, split);
    // This subgroup's operand (q or do) and half of the dims.
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

    // Plain-code role (invocations 0..63): pair e0 + r, keys 4 c4 .. 4 c4 + 3 of each block.
    let r = tid % TR;
    let c4 = (tid / TR) % 4u;
    let me = sight(e0 + r);
    let li = pair_lse[r];
    let delta = pair_delta(r);
    // q and do are held: `tile` may take the keys.
    workgroupBarrier();

    let d0 = sg * (HD / 4u);
    var q0 = MatC();
    var q1 = MatC();
    var q2 = MatC();
    var q3 = MatC();
    for (var j0 = keys.x; j0 < keys.y; j0 += TR) {
        stage_keys(g, j0, 0u, TR, false, tid);
        stage_keys(g, j0, TR, TR, true, tid);
        workgroupBarrier();
        score_part(a0, a1, a2, a3, a4, a5, a6, a7, TR * t, dh, sg);
        workgroupBarrier();
        if tid < 64u {
            let c = 4u * c4;
            let w = vec4<f32>(
                ds_entry(me, r, j0, c, li, delta),
                ds_entry(me, r, j0, c + 1u, li, delta),
                ds_entry(me, r, j0, c + 2u, li, delta),
                ds_entry(me, r, j0, c + 3u, li, delta),
            );
            wt[r * RW + c4] = vec4<f16>(w);
        }
        workgroupBarrier();
        let dw = load_w(0u);
        let at = d0 / 4u;
        q0 = mma(dw, load_b_rows(at), q0);
        if HD >= 128u {
            q1 = mma(dw, load_b_rows(at + 4u), q1);
        }
        if HD >= 256u {
            q2 = mma(dw, load_b_rows(at + 8u), q2);
            q3 = mma(dw, load_b_rows(at + 12u), q3);
        }
        workgroupBarrier();
    }

    let dq_at = p.dq_offset + split * p.n * p.n_head * HD;
    let f = p.scale / DO_SCALE;
    put_rows(q0, 0u, f, sg, tid, g, e0, dq_at);
    if HD >= 128u {
        put_rows(q1, 16u, f, sg, tid, g, e0, dq_at);
    }
    if HD >= 256u {
        put_rows(q2, 32u, f, sg, tid, g, e0, dq_at);
        put_rows(q3, 48u, f, sg, tid, g, e0, dq_at);
    }
}

// Accumulator `acc` (dims dt .. dt + 15 of each subgroup's quarter), times `f`, into dq from
// `at`, the pairs inside, through `parts`. Called by every invocation in uniform control flow
// (it holds barriers).
fn put_rows(acc: MatC, dt: u32, f: f32, sg: u32, tid: u32, g: u32, e0: u32, at: u32) {
    store_rows(acc, 256u * sg);
    workgroupBarrier();
    for (var u = 0u; u < 8u; u++) {
        let i = tid + WG * u;
        let e = e0 + (i % 256u) / 16u;
        if e < pair_count() {
            let dst = at + pair_row(g, e) * HD + (i / 256u) * (HD / 4u) + dt + i % 16u;
            dq[dst] = f * parts[i];
        }
    }
    workgroupBarrier();
}
