// The weight staging of the tensor-core products that decode their weights
// (matmul/matmul_coop.wgsl, matmul/small_m.wgsl). The kernel declares the weight tile `ws`
// (vec4<f16> rows RS apart) and the parameters.

// 16 staged values as f16, in named fields rather than an array: a private array indexed in a
// loop may live in local memory, and matmul_coop ran 2-2.5x slower so (docs/PERF.md,
// D-named-registers).
struct Staged {
    c0: vec4<f16>,
    c1: vec4<f16>,
    c2: vec4<f16>,
    c3: vec4<f16>,
}

// Half dh of unit u's weights for the row at byte wrow (stage_w_half), rounded to f16.
fn stage_w(wrow: u32, u: u32, dh: u32, row_ok: bool) -> Staged {
    let q = stage_w_half(wrow, u, dh, row_ok);
    return Staged(vec4<f16>(q[0]), vec4<f16>(q[1]), vec4<f16>(q[2]), vec4<f16>(q[3]));
}

// Stores half dh of row dr's staged weights at column `col` (vec4s) of the weight tile.
fn put_w(q: Staged, dr: u32, dh: u32, col: u32) {
    let at = dr * RS + col + 4u * dh;
    ws[at] = q.c0;
    ws[at + 1u] = q.c1;
    ws[at + 2u] = q.c2;
    ws[at + 3u] = q.c3;
}
