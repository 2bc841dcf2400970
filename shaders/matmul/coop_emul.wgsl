enable f16;

// coop_ops.wgsl's operations in plain arithmetic, so matmul_coop.wgsl's body (staging, tile
// addressing, quarters, both stores) runs on devices without cooperative matrices: the
// tensor-core kernel's tests run it on lavapipe. Never picked for a model (`Matmul::kernel`
// uses the tensor cores only where `Caps::coop_f16` holds).
//
// As on the hardware, a quarter's 32 invocations share each matrix: invocation `lane` (told by
// `coop_lane`) holds elements lane + 32j (j < 8) of a 16 x 16 C, element e at row e % 16,
// column e / 16. A and B stay in workgroup memory (a load records where; `mma` reads there,
// between the same barriers as the real loads).
//
// The layouts as SPV_KHR_cooperative_matrix defines them for a pointer to a vector type: the
// stride counts vectors and a vector's components are consecutive elements, so element (r, k)
// of a row-major A at vec4 `at` is component k % 4 of vec4 at + r * RS + k / 4; element (k, c)
// of a column-major B, component k % 4 of vec4 at + c * RS + k / 4.

var<private> emul_lane: u32;

fn coop_lane(lane: u32) {
    emul_lane = lane;
}

struct MatA {
    at: u32,
}

struct MatB {
    at: u32,
}

struct MatC {
    v: array<f32, 8>,
}

fn load_a(at: u32) -> MatA {
    return MatA(at);
}

fn load_b(at: u32) -> MatB {
    return MatB(at);
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
            let w = ws[a.at + r * RS + k / 4u][k % 4u];
            let v = xs[b.at + col * RS + k / 4u][k % 4u];
            s = fma(f32(w), f32(v), s);
        }
        d.v[j] = s;
    }
    return d;
}

fn store_y(c: MatC, at: u32, stride: u32) {
    for (var j = 0u; j < 8u; j++) {
        let e = emul_lane + 32u * j;
        y[at + (e / 16u) * stride + e % 16u] = c.v[j];
    }
}

fn store_scratch(c: MatC, at: u32) {
    for (var j = 0u; j < 8u; j++) {
        let e = emul_lane + 32u * j;
        cs[at + 16u * (e / 16u) + e % 16u] = c.v[j];
    }
}
