// The partial-tile store of the tensor-core products (matmul/matmul_coop.wgsl,
// matmul/small_m.wgsl, matmul/matmul_dense.wgsl): an accumulator through the subgroup's 16 x 16
// scratch `cs` (each kernel declares it) into Y, element by element, where a tile is not whole
// inside one output. With `accumulate` (the dense kernel's `Matmul::dense_ops_into`) the
// product is added to Y's value; the value and place files give `y_out` and `y_index`.

// Writes accumulator `c` (rows row0.., tokens tok0..) through the subgroup's scratch at
// cs[scratch..], keeping only elements inside Y (y0: where this workgroup's token 0 lands).
// Called by every invocation in uniform control flow (it holds barriers).
fn store_partial(c: MatC, scratch: u32, lane: u32, row0: u32, tok0: u32, y0: u32) {
    store_scratch(c, scratch);
    workgroupBarrier();
    for (var e = 0u; e < 8u; e++) {
        let i = lane + 32u * e;
        let row = row0 + i % 16u;
        let t = tok0 + i / 16u;
        if row < p.n_rows && t < p.n_tokens {
            let at = y_index(row, t, y0 + t * p.y_stride + row);
            var v = y_out(row, cs[scratch + i]);
            if p.accumulate != 0u {
                v = y[at] + v;
            }
            y[at] = v;
        }
    }
    workgroupBarrier();
}
