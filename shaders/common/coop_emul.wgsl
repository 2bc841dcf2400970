enable f16;

// common/coop_ops.wgsl's product in plain arithmetic, so a tensor-core kernel's body (staging,
// tile addressing, masks, both stores) runs on devices without cooperative matrices: the
// kernels' tests run it on lavapipe. Never picked for a model (the tensor-core kernels run only
// where `Caps::coop_f16` holds). The kernel's coop_io_emul.wgsl defines its loads, stores and
// operand types.
//
// As on the hardware, a subgroup's 32 invocations share each matrix: invocation `lane` (told by
// `coop_lane`) holds elements lane + 32j (j < 8) of a 16 x 16 C, element e at row e % 16,
// column e / 16. A and B stay where they were loaded from (a load records where; `mma` reads
// them there through the kernel's `a_elem` and `b_elem`, between the same barriers as the real
// loads). The layouts are as SPV_KHR_cooperative_matrix defines them for a pointer to a vector
// type: the stride counts vectors and a vector's components are consecutive elements.

var<private> emul_lane: u32;

fn coop_lane(lane: u32) {
    emul_lane = lane;
}

struct MatC {
    v: array<f32, 8>,
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

// Where this invocation's element j of a C goes in a column-major tile stored from element
// `at`, columns `stride` apart.
fn c_index(j: u32, at: u32, stride: u32) -> u32 {
    let e = emul_lane + 32u * j;
    return at + (e / 16u) * stride + e % 16u;
}
