// Where the weight kernels (matvec, matmul) read and store a row with split outputs: the
// dispatch covers rows row_base .. row_base + n_rows of the weight chunk (a row range of a
// stacked weight: q|k|v or gate|up uploaded as one matrix), and its row r goes to output
// j = (r >= end0) + (r >= end1) (at most 3), element
// y_offsets[j] + t * y_strides[j] + r of y. The host folds each output's first row into its
// offset (mod 2^32), so one select and one multiply-add place a row; every output is a
// region of the one y binding.
fn w_row(r: u32) -> u32 {
    return p.split.row_base + r;
}

fn y_output(r: u32) -> u32 {
    return u32(r >= p.split.end0) + u32(r >= p.split.end1);
}

fn y_index(r: u32, t: u32, one: u32) -> u32 {
    let j = y_output(r);
    return p.split.y_offsets[j] + t * p.split.y_strides[j] + r;
}

// Where rows r0 ..= r1 land for a whole-tile store (the tensor-core matmul): the (offset,
// token stride) of r0's output and whether r1 goes to the same one (else 0: the caller stores
// row by row through y_index).
fn y_tile(r0: u32, r1: u32, one: vec2<u32>) -> vec3<u32> {
    let j = y_output(r0);
    return vec3<u32>(p.split.y_offsets[j], p.split.y_strides[j], u32(j == y_output(r1)));
}
