// Where the weight kernels (matvec, matmul) read and store a row with one output: dispatch
// row `r` is row `r` of the weight chunk, and it lands where the kernel's own index says
// (`one`: y_offset + r for the matvec, plus t * y_stride for the matmul). The split variant
// (common/out_split.wgsl) defines the same functions over a row range and several outputs;
// this one adds nothing to the kernel's arithmetic.
fn w_row(r: u32) -> u32 {
    return r;
}

fn y_index(r: u32, t: u32, one: u32) -> u32 {
    return one;
}

// Where rows r0 ..= r1 land when they all go to one output, for a whole-tile store (the
// tensor-core matmul): (offset, token stride, 1), `one` being the kernel's own (y_offset,
// y_stride). With one output they always do.
fn y_tile(r0: u32, r1: u32, one: vec2<u32>) -> vec3<u32> {
    return vec3<u32>(one, 1u);
}
