// matmul/coop_io.wgsl's loads and stores for common/coop_emul.wgsl: a load records where its
// tile is (and A its layout); element (r, k) of A is component k % 4 of vec4 at + r * RS + k / 4
// of `ws` (row-major, `load_a`) or component r % 4 of vec4 at + k * stride + r / 4
// (column-major, `load_a_cols`), element (k, c) of B (column-major) component k % 4 of vec4
// at + c * RS + k / 4 of `xs`.

struct MatA {
    at: u32,
    // Vec4s between rows (row-major) or columns (column-major).
    stride: u32,
    cols: bool,
}

struct MatB {
    at: u32,
}

fn load_a(at: u32) -> MatA {
    return MatA(at, RS, false);
}

fn load_a_cols(at: u32, stride: u32) -> MatA {
    return MatA(at, stride, true);
}

fn load_b(at: u32) -> MatB {
    return MatB(at);
}

fn a_elem(a: MatA, r: u32, k: u32) -> f16 {
    if a.cols {
        return ws[a.at + k * a.stride + r / 4u][r % 4u];
    }
    return ws[a.at + r * a.stride + k / 4u][k % 4u];
}

fn b_elem(b: MatB, k: u32, c: u32) -> f16 {
    return xs[b.at + c * RS + k / 4u][k % 4u];
}

fn load_y(at: u32, stride: u32) -> MatC {
    var c: MatC;
    for (var j = 0u; j < 8u; j++) {
        c.v[j] = y[c_index(j, at, stride)];
    }
    return c;
}

fn store_y(c: MatC, at: u32, stride: u32) {
    for (var j = 0u; j < 8u; j++) {
        y[c_index(j, at, stride)] = c.v[j];
    }
}

fn store_scratch(c: MatC, at: u32) {
    for (var j = 0u; j < 8u; j++) {
        cs[c_index(j, at, 16u)] = c.v[j];
    }
}
