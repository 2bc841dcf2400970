// The GLU epilogue of the decode matvec: over gate|up, two projections of one input stacked
// as consecutive rows of one weight chunk (gate's n_ff rows from row_base, then up's n_ff),
// the matvec stores y[y_offset + i] = act(gate_i . x) * (up_i . x) for i < n_ff: a gated
// FFN's GLU without a dispatch of its own, and without the 2 n_ff products going through
// memory. act comes from elementwise/act.wgsl (the ACT override), the expression is the glu
// kernel's, so the value equals the separate product + glu bit for bit where the row sums
// do (each row is summed as the plain matvec sums it).
//
// Dispatch rows go in fours, one workgroup's R = 4: (gate 2k, gate 2k + 1, up 2k, up 2k + 1).
// n_ff is the split table's first end (`split.end0`: where gate's rows end, as a two-output
// split of gate|up would have it); the dispatch has 4 ceil(n_ff / 2) rows, and with n_ff odd
// the last four's second pair re-reads row n_ff - 1, whose value is not stored.

fn glu_gate_row(r: u32) -> u32 {
    return min(2u * (r / 4u) + (r & 1u), p.split.end0 - 1u);
}

fn w_row(r: u32) -> u32 {
    return p.split.row_base + glu_gate_row(r) + select(0u, p.split.end0, (r & 2u) != 0u);
}

// Nothing to load before the loop.
fn store_begin(row0: u32, t: u32) {}

// Lane t < 2 of a quad stores pair t from its own total (gate row t) and the entry's
// `quad_total(t + 2)` (up row t + 2, summed in the order lane t + 2 sums it), so no lane
// waits for another's total: no barrier of its own. Every invocation calls this in uniform
// control flow (the input's x_scale may reduce across the workgroup). t: the lane in its
// quad, tid: in the workgroup.
fn store_rows(row0: u32, t: u32, tid: u32, v: f32) {
    // The input's factor of the row totals (1 but for matvec/x_norm.wgsl and x_scaled.wgsl).
    let scale = x_scale(tid);
    let i = row0 / 2u + t;
    if t < 2u && i < p.split.end0 {
        y[p.y_offset + i] = act(v * scale) * (quad_total(t + 2u) * scale);
    }
}
