// attention_coop.wgsl's loads and stores on the tensor cores (the types and the product:
// common/coop_ops.wgsl). A = q rows or P (rows x dims or keys), B = K^T (dims x keys) or V
// (keys x dims), C = rows x keys or rows x dims, in f32.

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

// C into the score tile from element `at`, column-major, columns 16 apart.
fn store_s(c: MatC, at: u32) {
    coopStore(c, &ss[at], 16u);
}

// C into the output scratch from element `at`, column-major, columns 16 apart.
fn store_o(c: MatC, at: u32) {
    coopStore(c, &os[at], 16u);
}
