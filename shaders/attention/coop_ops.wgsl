enable f16;
enable wgpu_cooperative_matrix;

// The cooperative-matrix operations of attention_coop.wgsl (first in its program: WGSL's
// `enable` directives must open the module). `coop_emul.wgsl` beside it defines the same
// names with plain arithmetic, so the kernel's body also runs, as a test, where there are no
// tensor cores. Each op is a function whose operands are parameters (naga 30 emits a
// `coopStore`'s arguments late otherwise: see matmul/coop_ops.wgsl).

// 16 x 16 tiles: A = q rows or P (rows x dims or keys), B = K^T (dims x keys) or V (keys x
// dims), C = rows x keys or rows x dims, in f32.
alias MatA = coop_mat16x16<f16, A>;
alias MatB = coop_mat16x16<f16, B>;
alias MatC = coop_mat16x16<f32, C>;

// Which of its subgroup's invocations this is: only the emulation needs telling.
fn coop_lane(lane: u32) {}

// q rows from the q tile at vec4 `at`: row-major, rows RQ vec4s apart.
fn load_q(at: u32) -> MatA {
    return coopLoadT<MatA>(&qs[at], RQ);
}

// P from the P tile at vec4 `at`: row-major, rows RP vec4s apart.
fn load_p(at: u32) -> MatA {
    return coopLoadT<MatA>(&ps[at], RP);
}

// K^T from the K cache at vec4 `at`: a key's values are consecutive, so column-major, columns
// (keys) HD / 4 vec4s apart.
fn load_kt(at: u32) -> MatB {
    return coopLoad<MatB>(&kc[at], HD / 4u);
}

// V from the V cache at vec4 `at`: row-major, rows (keys) HD / 4 vec4s apart.
fn load_v(at: u32) -> MatB {
    return coopLoadT<MatB>(&vc[at], HD / 4u);
}

fn mma(a: MatA, b: MatB, c: MatC) -> MatC {
    return coopMultiplyAdd(a, b, c);
}

// C into the score tile from element `at`, column-major, columns 16 apart.
fn store_s(c: MatC, at: u32) {
    coopStore(c, &ss[at], 16u);
}

// C into the output scratch from element `at`, column-major, columns 16 apart.
fn store_o(c: MatC, at: u32) {
    coopStore(c, &os[at], 16u);
}
