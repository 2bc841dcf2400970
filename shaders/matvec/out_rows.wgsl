// The matvec's store of its rows: lane t < R of a quad stores row row0 + t (rows past the
// dispatch's are dropped) through the value file's `y_out` and the place file's `y_index`
// (common/out_{store,bias}.wgsl, common/out_{one,split}.wgsl). The GLU epilogue
// (matvec/out_glu.wgsl) is the alternative. Called by every invocation (tid: its index in
// the workgroup): the input's `x_scale` may reduce across the workgroup (1 but for
// matvec/x_norm.wgsl, which scales the row totals by its norm).
// Nothing to load before the loop.
fn store_begin(row0: u32, t: u32) {}

fn store_rows(row0: u32, t: u32, tid: u32, v: f32) {
    let scale = x_scale(tid);
    let r = row0 + t;
    if t < R && r < p.n_rows {
        y[y_index(r, 0u, p.y_offset + r)] = y_out(r, v * scale);
    }
}
