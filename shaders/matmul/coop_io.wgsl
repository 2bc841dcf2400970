// matmul_coop.wgsl's loads and stores on the tensor cores (the types and the product:
// common/coop_ops.wgsl). A = weights (rows x inputs), B = inputs (inputs x tokens),
// C = rows x tokens. input_grad_coop.wgsl uses them with A = the weights transposed (inputs x
// rows, `load_a_cols`), B = dY (rows x tokens), C = inputs x tokens.

// A from the weight tile `ws` at vec4 `at`: row-major, rows RS vec4s apart.
fn load_a(at: u32) -> MatA {
    return coopLoadT<MatA>(&ws[at], RS);
}

// A from the weight tile `ws` at vec4 `at`, column-major, columns `stride` vec4s apart: the
// input gradient's W^T from weights staged as decoded (a weight row's inputs consecutive; its
// weight rows are as long as its tile's inputs, wider than `xs`'s RS).
fn load_a_cols(at: u32, stride: u32) -> MatA {
    return coopLoad<MatA>(&ws[at], stride);
}

// B from the input tile `xs` at vec4 `at`: a token's inputs are consecutive, so column-major,
// columns RS vec4s apart.
fn load_b(at: u32) -> MatB {
    return coopLoad<MatB>(&xs[at], RS);
}

// C from y at element `at`, laid out as `store_y` stores it (what an accumulating product
// adds to).
fn load_y(at: u32, stride: u32) -> MatC {
    return coopLoad<MatC>(&y[at], stride);
}

// C into y from element `at`, column-major (a token's rows are consecutive), columns `stride`
// apart; `at` and `stride` multiples of 4 (16-byte aligned, as Vulkan requires).
fn store_y(c: MatC, at: u32, stride: u32) {
    coopStore(c, &y[at], stride);
}

// C into the scratch `cs` from element `at`, column-major, columns 16 apart.
fn store_scratch(c: MatC, at: u32) {
    coopStore(c, &cs[at], 16u);
}
