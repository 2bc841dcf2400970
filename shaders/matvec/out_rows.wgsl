// The matvec's store of its rows: invocation tid < R stores row row0 + tid (rows past the
// dispatch's are dropped) through the value file's `y_out` and the place file's `y_index`
// (common/out_{store,bias}.wgsl, common/out_{one,split}.wgsl). The GLU epilogue
// (matvec/out_glu.wgsl) is the alternative.
fn store_rows(row0: u32, tid: u32, v: f32) {
    let r = row0 + tid;
    if tid < R && r < p.n_rows {
        y[y_index(r, 0u, p.y_offset + r)] = y_out(r, v);
    }
}
