// Where the weight kernels (matvec, matmul) read and store a row with split outputs: the
// dispatch covers rows row_base .. row_base + n_rows of the weight chunk (a row range of a
// stacked weight: q|k|v or gate|up uploaded as one matrix), and its row r goes to output
// j = (r >= split_end0) + (r >= split_end1) (at most 3), element
// y_offsets[j] + t * y_strides[j] + r of y. The host folds each output's first row into its
// offset (mod 2^32), so one select and one multiply-add place a row; every output is a
// region of the one y binding.
fn w_row(r: u32) -> u32 {
    return p.row_base + r;
}

fn y_index(r: u32, t: u32, one: u32) -> u32 {
    let j = u32(r >= p.split_end0) + u32(r >= p.split_end1);
    return p.y_offsets[j] + t * p.y_strides[j] + r;
}
