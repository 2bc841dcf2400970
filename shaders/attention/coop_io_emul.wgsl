// attention/coop_io.wgsl's loads and stores for common/coop_emul.wgsl: a load records its
// source and where its tile is, and `a_elem` / `b_elem` read an element there.

// Sources: A from the q tile (0) or the P tile (1); B from the K cache as K^T (0) or the V
// cache (1).
struct MatA {
    at: u32,
    src: u32,
}

struct MatB {
    at: u32,
    src: u32,
}

fn load_q(at: u32) -> MatA {
    return MatA(at, 0u);
}

fn load_p(at: u32) -> MatA {
    return MatA(at, 1u);
}

fn load_kt(at: u32) -> MatB {
    return MatB(at, 0u);
}

fn load_v(at: u32) -> MatB {
    return MatB(at, 1u);
}

// Element (r, k) of A: row-major.
fn a_elem(a: MatA, r: u32, k: u32) -> f16 {
    if a.src == 0u {
        return qs[a.at + r * RQ + k / 4u][k % 4u];
    }
    return ps[a.at + r * RP + k / 4u][k % 4u];
}

// Element (k, n) of B: K^T column-major (column n = a key), V row-major (row k = a key).
fn b_elem(b: MatB, k: u32, n: u32) -> f16 {
    if b.src == 0u {
        return kc[b.at + n * (HD / 4u) + k / 4u][k % 4u];
    }
    return vc[b.at + k * (HD / 4u) + n / 4u][n % 4u];
}

fn store_s(c: MatC, at: u32) {
    for (var j = 0u; j < 8u; j++) {
        ss[c_index(j, at, 16u)] = c.v[j];
    }
}

fn store_o(c: MatC, at: u32) {
    for (var j = 0u; j < 8u; j++) {
        os[c_index(j, at, 16u)] = c.v[j];
    }
}
