// The loads and stores of the attention's tensor-core programs: the prompt attention
// (attention/attention_coop.wgsl) and training's (attention/train_forward_coop.wgsl,
// attention/train_backward_dq_coop.wgsl, attention/train_backward_dkdv_coop.wgsl); the types
// and the product: common/coop_ops.wgsl. `tile` holds a block's 32 rows of HD f16 values RS
// vec4s apart, or a slice of the dims of the held rows (q and do, or k and v) QS apart;
// `wt` the block's f16 weights (P, ds), RW apart; `scores` f32 tiles, column-major with
// columns SC apart.

// 16 held rows of `tile` from vec4 `at` as A (rows x dims): row-major.
fn load_held(at: u32) -> MatA {
    return coopLoadT<MatA>(&tile[at], QS);
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

// A score tile into `scores` from element `at`: column-major, columns SC apart.
fn store_scores(c: MatC, at: u32) {
    coopStore(c, &scores[at], SC);
}

// C into `scores` from element `at`, row-major, rows 16 apart.
fn store_rows(c: MatC, at: u32) {
    coopStoreT(c, &scores[at], 16u);
}
