// The tensor-core dk/dv pass's staging of a block of 16 (row, head) pairs
// (attention/train_backward_dkdv_coop.wgsl, its inputs in
// attention/train_backward_coop_inputs.wgsl): their q and scaled do into the tile with each
// pair's lse and D.

// Each staging invocation's share of its pair's D (pair r's at 8 r .. 8 r + 7).
var<workgroup> d_parts: array<f32, 128>;
// The staged pairs' log-sum-exp.
var<workgroup> pair_lse: array<f32, 16>;
// The tile's range: the rows that may see its keys (x .. y).
var<workgroup> range_s: vec4<u32>;

// Stages the q rows (tile rows 0..15) and the scaled do rows (16..31) of kv head g's pairs
// e0.. (zeros past the block's pairs), each pair's lse, and the invocation's share of each
// pair's D: invocation tid stages pair tid / 8, vec4s tid % 8 + 8 x.
fn stage_pairs(g: u32, e0: u32, tid: u32) {
    let r = tid / 8u;
    let e = e0 + r;
    let inside = e < pair_count();
    var row = 0u;
    if inside {
        row = pair_row(g, e);
    }
    var part = 0.0;
    for (var x = tid % 8u; x < HD / 4u; x += 8u) {
        var a = vec4<f32>(0.0);
        var d = vec4<f32>(0.0);
        if inside {
            a = q4(p.q_offset + row * HD + 4u * x);
            d = do4(p.do_offset + row * HD + 4u * x);
            part += dot(d, o4(p.o_offset + row * HD + 4u * x));
        }
        tile[r * RS + x] = vec4<f16>(a);
        tile[(16u + r) * RS + x] = vec4<f16>(d * DO_SCALE);
    }
    d_parts[tid] = part;
    if tid % 8u == 0u {
        var l = 0.0;
        if inside {
            l = lse[p.lse_offset + row];
        }
        pair_lse[r] = l;
    }
}

// Pair c's D = do . o, times DO_SCALE (after the barrier that follows stage_pairs).
fn pair_delta(c: u32) -> f32 {
    let at = 8u * c;
    let a = (d_parts[at] + d_parts[at + 1u]) + (d_parts[at + 2u] + d_parts[at + 3u]);
    let b = (d_parts[at + 4u] + d_parts[at + 5u]) + (d_parts[at + 6u] + d_parts[at + 7u]);
    return (a + b) * DO_SCALE;
}
