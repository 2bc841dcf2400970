enable f16;

// attention/coop_ops.wgsl's operations in plain arithmetic, so attention_coop.wgsl's body
// (staging, the two passes, masks, the stores) runs on devices without cooperative matrices:
// its tests run it on lavapipe. Never picked for a model (`AttentionCoop` runs only where
// `Caps::coop_f16` holds). The element layout is matmul/coop_emul.wgsl's: invocation `lane`
// holds elements lane + 32j (j < 8) of a 16 x 16 C, element e at row e % 16, column e / 16;
// A and B stay where they were loaded from (a load records the source and the place) and
// `mma` reads them there, between the same barriers as the real loads. Layouts as
// SPV_KHR_cooperative_matrix defines them for a pointer to vectors: the stride counts vectors,
// a vector's components are consecutive elements.

var<private> emul_lane: u32;

fn coop_lane(lane: u32) {
    emul_lane = lane;
}

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

struct MatC {
    v: array<f32, 8>,
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

// f16 x f16 products are exact in f32; summed in k order with one FMA each.
fn mma(a: MatA, b: MatB, c: MatC) -> MatC {
    var d = c;
    for (var j = 0u; j < 8u; j++) {
        let e = emul_lane + 32u * j;
        let r = e % 16u;
        let col = e / 16u;
        var s = d.v[j];
        for (var k = 0u; k < 16u; k++) {
            s = fma(f32(a_elem(a, r, k)), f32(b_elem(b, k, col)), s);
        }
        d.v[j] = s;
    }
    return d;
}

fn store_s(c: MatC, at: u32) {
    for (var j = 0u; j < 8u; j++) {
        let e = emul_lane + 32u * j;
        ss[at + 16u * (e / 16u) + e % 16u] = c.v[j];
    }
}

fn store_o(c: MatC, at: u32) {
    for (var j = 0u; j < 8u; j++) {
        let e = emul_lane + 32u * j;
        os[at + 16u * (e / 16u) + e % 16u] = c.v[j];
    }
}
