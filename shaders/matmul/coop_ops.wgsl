enable f16;
enable wgpu_cooperative_matrix;

// The cooperative-matrix operations of matmul_coop.wgsl (first in its program: WGSL's `enable`
// directives must open the module). `coop_emul.wgsl` defines the same names with plain
// arithmetic, so the kernel's body also runs, as a test, where there are no tensor cores.
//
// Each op is a function whose operands are parameters or constants: naga 30's WGSL front end
// pushes a `coopStore` statement before the expressions of its arguments are emitted (its
// SPIR-V writer then panics, "Expression [..] is not cached"), and parameters need no emitting.

// 16 x 16 tiles: A = weights (rows x inputs), B = inputs (inputs x tokens), C = rows x tokens.
alias MatA = coop_mat16x16<f16, A>;
alias MatB = coop_mat16x16<f16, B>;
alias MatC = coop_mat16x16<f32, C>;

// Which of its subgroup's invocations this is: the hardware spreads each matrix over the
// subgroup itself; only the emulation needs telling.
fn coop_lane(lane: u32) {}

// A from the weight tile `ws` at vec4 `at`: row-major, rows RS vec4s apart.
fn load_a(at: u32) -> MatA {
    return coopLoadT<MatA>(&ws[at], RS);
}

// B from the input tile `xs` at vec4 `at`: a token's inputs are consecutive, so column-major,
// columns RS vec4s apart.
fn load_b(at: u32) -> MatB {
    return coopLoad<MatB>(&xs[at], RS);
}

fn mma(a: MatA, b: MatB, c: MatC) -> MatC {
    return coopMultiplyAdd(a, b, c);
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
