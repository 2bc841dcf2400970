// The matvec's residual epilogue (store file): the product's rows are the addend `a` of a
// Llama-style residual op, h' = h + a then y = rms_norm(h') * w_out, and the dispatch does
// all of it that needs no other row: lane t < R of a quad adds its row's total to h (in
// place at h_offset: each row belongs to one workgroup), stores z = h' * w_out (the norm
// before its one scale) at y_offset of the skeleton's y, and the workgroup stores the sum of
// its rows' h'^2 (in row order) at word x_out_offset + its index of `partials`. The products
// that read y take z and the partial sums instead (matvec/x_scaled.wgsl: each of their
// workgroups reduces the sums to 1 / rms(h') and scales its row totals by it, as the norm
// input does), so the residual op needs no dispatch of its own and no workgroup of this one
// waits for another. (The last workgroup doing the whole op after an arrival count, the
// attention merge's pattern, is slower than the dispatch it saves: docs/PERF.md,
// X-residual-last-workgroup.)

@group(0) @binding(6) var<storage, read_write> h: array<f32>;
@group(0) @binding(7) var<storage, read> w_out: array<f32>;
@group(0) @binding(8) var<storage, read_write> partials: array<f32>;

// h'^2 of the workgroup's rows: R a quad, MAX_QUADS (16) quads at most.
var<workgroup> row_sq: array<f32, 64>;

fn w_row(r: u32) -> u32 {
    return r;
}

// Lane t < R's row of h and of the gain, loaded before the weights' loop (after it they
// would be one more round trip to memory at the end of the kernel).
var<private> h_row: f32;
var<private> gain_row: f32;

fn store_begin(row0: u32, t: u32) {
    let r = min(row0 + t, p.n_rows - 1u);
    if t < R {
        h_row = h[p.h_offset + r];
        gain_row = w_out[r];
    }
}

fn store_rows(row0: u32, t: u32, tid: u32, v: f32) {
    let scale = x_scale(tid);
    let r = row0 + t;
    var sq = 0.0;
    if t < R && r < p.n_rows {
        let hv = h_row + v * scale;
        h[p.h_offset + r] = hv;
        y[p.y_offset + r] = hv * gain_row;
        sq = hv * hv;
    }
    if t < R {
        row_sq[quad * R + t] = sq;
    }
    workgroupBarrier();
    if tid == 0u {
        var s = 0.0;
        for (var i = 0u; i < R * QUADS; i++) {
            s += row_sq[i];
        }
        partials[p.x_out_offset + row0 / (R * QUADS)] = s;
    }
}
