// The training attention backward's tensor-core loads and stores (attention/train_coop_tiles.wgsl; the
// types and the product: common/coop_ops.wgsl). `tile` holds 32 rows of HD f16 values, RS
// vec4s apart; `wt` each program's f16 weights (P or ds), RW vec4s apart; `parts` f32.

// 16 rows of `tile` from vec4 `at` as A (rows x dims): row-major.
fn load_a_rows(at: u32) -> MatA {
    return coopLoadT<MatA>(&tile[at], RS);
}

// 16 x 16 weights from vec4 `at` of `wt` as A: row-major.
fn load_w(at: u32) -> MatA {
    return coopLoadT<MatA>(&wt[at], RW);
}

// 16 rows of `tile` from vec4 `at` as B = their transpose (dims x rows): a row's values are
// consecutive, so column-major, columns RS vec4s apart.
fn load_bt(at: u32) -> MatB {
    return coopLoad<MatB>(&tile[at], RS);
}

// 16 rows of `tile` from vec4 `at` as B (rows x dims): row-major.
fn load_b_rows(at: u32) -> MatB {
    return coopLoadT<MatB>(&tile[at], RS);
}

// C into `parts` from element `at`, column-major, columns 16 apart.
fn store_part(c: MatC, at: u32) {
    coopStore(c, &parts[at], 16u);
}

// C into `parts` from element `at`, row-major, rows 16 apart.
fn store_rows(c: MatC, at: u32) {
    coopStoreT(c, &parts[at], 16u);
}
