// The tensor cores' own pace through wgpu's cooperative matrices, for the kernels bench
// (`coop_peak/...`): no kernel runs it. After common/coop_ops.wgsl (the types and `mma`).
// Each of a workgroup's 8 subgroups multiplies 16 x 16 x 16 tiles into 8 accumulators,
// ITERS times, with its A and B tiles
// - MODE 0: loaded once (operands in registers),
// - MODE 1: reloaded from workgroup memory before every pass of 8 products,
// - MODE 2: reloaded so, with a barrier every two passes (a matmul's staging rhythm without
//   the staging).
// The accumulators are stored at the end so that nothing is optimized away.

override ITERS: u32 = 1024u;
override MODE: u32 = 0u;
const RS: u32 = 10u;

struct Params {
    // Elements between two subgroups' stores in y (8 accumulators of 256).
    out_stride: u32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;

var<workgroup> ws: array<vec4<f16>, 1600>;
var<workgroup> xs: array<vec4<f16>, 1600>;

fn load_a(at: u32) -> MatA {
    return coopLoadT<MatA>(&ws[at], RS);
}

fn load_b(at: u32) -> MatB {
    return coopLoad<MatB>(&xs[at], RS);
}

fn store(c: MatC, at: u32) {
    coopStore(c, &y[at], 16u);
}

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) tid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    for (var i = tid; i < 1600u; i += 256u) {
        ws[i] = vec4<f16>(f16(i % 7u) * 0.01h);
        xs[i] = vec4<f16>(f16(i % 5u) * 0.01h);
    }
    workgroupBarrier();
    let sg = tid / 32u;
    let ab = (sg % 4u) * 32u * RS;
    let bb = (sg / 4u) * 64u * RS;
    var a0 = load_a(ab);
    var a1 = load_a(ab + 16u * RS);
    var b0 = load_b(bb);
    var b1 = load_b(bb + 16u * RS);
    var b2 = load_b(bb + 32u * RS);
    var b3 = load_b(bb + 48u * RS);
    var c00 = MatC();
    var c01 = MatC();
    var c02 = MatC();
    var c03 = MatC();
    var c10 = MatC();
    var c11 = MatC();
    var c12 = MatC();
    var c13 = MatC();
    for (var it = 0u; it < ITERS; it++) {
        if MODE != 0u {
            let h = 4u * (it % 2u);
            a0 = load_a(ab + h);
            a1 = load_a(ab + 16u * RS + h);
            b0 = load_b(bb + h);
            b1 = load_b(bb + 16u * RS + h);
            b2 = load_b(bb + 32u * RS + h);
            b3 = load_b(bb + 48u * RS + h);
        }
        c00 = mma(a0, b0, c00);
        c01 = mma(a0, b1, c01);
        c02 = mma(a0, b2, c02);
        c03 = mma(a0, b3, c03);
        c10 = mma(a1, b0, c10);
        c11 = mma(a1, b1, c11);
        c12 = mma(a1, b2, c12);
        c13 = mma(a1, b3, c13);
        if MODE == 2u && it % 2u == 1u {
            workgroupBarrier();
        }
    }
    let at = (wid.x * 8u + sg) * p.out_stride;
    store(c00, at);
    store(c01, at + 256u);
    store(c02, at + 512u);
    store(c03, at + 768u);
    store(c10, at + 1024u);
    store(c11, at + 1280u);
    store(c12, at + 1536u);
    store(c13, at + 1792u);
}
