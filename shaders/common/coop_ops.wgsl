enable f16;
enable wgpu_cooperative_matrix;

// The cooperative-matrix types and product of the tensor-core kernels (matmul/matmul_coop.wgsl,
// attention/attention_coop.wgsl), first in their programs: WGSL's `enable` directives must open
// the module. Each kernel's coop_io.wgsl beside it holds its loads and stores (which tiles they
// read and write); common/coop_emul.wgsl with the kernel's coop_io_emul.wgsl defines the same
// names in plain arithmetic, so the kernel's body also runs, as a test, where there are no
// tensor cores.
//
// Each op is a function whose operands are parameters or constants: naga 30's WGSL front end
// pushes a `coopStore` statement before the expressions of its arguments are emitted (its
// SPIR-V writer then panics, "Expression [..] is not cached"), and parameters need no emitting.

// 16 x 16 tiles: f16 operands A and B, f32 accumulators C.
alias MatA = coop_mat16x16<f16, A>;
alias MatB = coop_mat16x16<f16, B>;
alias MatC = coop_mat16x16<f32, C>;

// Which of its subgroup's invocations this is: the hardware spreads each matrix over the
// subgroup itself; only the emulation needs telling.
fn coop_lane(lane: u32) {}

fn mma(a: MatA, b: MatB, c: MatC) -> MatC {
    return coopMultiplyAdd(a, b, c);
}
