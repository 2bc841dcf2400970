// attention/coop_io.wgsl's loads and stores for common/coop_emul.wgsl. An A operand is
// held by value, as the hardware holds it in registers: the programs keep their fixed rows in
// A operands while `tile` is overwritten. The emulated product reads of A only this
// invocation's row (`coop_emul.wgsl`: invocation `lane` holds elements of row lane % 16 of a
// C), so an A is that row's 16 values. A B records where it was loaded from (it is used
// between the same barriers as the real load) and `b_elem` reads an element there.

struct MatA {
    v: array<f16, 16>,
}

// Sources: `tile` as the transpose of its rows (0) or as its rows (1).
struct MatB {
    at: u32,
    src: u32,
}

fn load_held(at: u32) -> MatA {
    var a: MatA;
    let r = emul_lane % 16u;
    for (var k = 0u; k < 16u; k++) {
        a.v[k] = tile[at + r * QS + k / 4u][k % 4u];
    }
    return a;
}

fn load_w(at: u32) -> MatA {
    var a: MatA;
    let r = emul_lane % 16u;
    for (var k = 0u; k < 16u; k++) {
        a.v[k] = wt[at + r * RW + k / 4u][k % 4u];
    }
    return a;
}

fn load_bt(at: u32) -> MatB {
    return MatB(at, 0u);
}

fn load_b_rows(at: u32) -> MatB {
    return MatB(at, 1u);
}

// Element (r, k) of A: r is this invocation's row (the only one the product asks for).
fn a_elem(a: MatA, r: u32, k: u32) -> f16 {
    return a.v[k];
}

// Element (k, n) of B: the transpose column-major (column n = a row of the tile), the rows
// row-major (row k = a row of the tile).
fn b_elem(b: MatB, k: u32, n: u32) -> f16 {
    if b.src == 0u {
        return tile[b.at + n * RS + k / 4u][k % 4u];
    }
    return tile[b.at + k * RS + n / 4u][n % 4u];
}

fn store_scores(c: MatC, at: u32) {
    for (var j = 0u; j < 8u; j++) {
        scores[c_index(j, at, SC)] = c.v[j];
    }
}

fn store_rows(c: MatC, at: u32) {
    for (var j = 0u; j < 8u; j++) {
        let e = emul_lane + 32u * j;
        scores[at + (e % 16u) * 16u + e / 16u] = c.v[j];
    }
}
