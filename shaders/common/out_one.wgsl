// Where the weight kernels (matvec, matmul) read and store a row with one output: dispatch
// row `r` is row `r` of the weight chunk, and it lands where the kernel's own index says
// (`one`: y_offset + r for the matvec, plus t * y_stride for the matmul). The split variant
// (common/out_split.wgsl) defines the same two functions over a row range and several
// outputs; this one adds nothing to the kernel's arithmetic.
fn w_row(r: u32) -> u32 {
    return r;
}

fn y_index(r: u32, t: u32, one: u32) -> u32 {
    return one;
}
