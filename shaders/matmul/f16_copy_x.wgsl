// A block of activations rounded to f16 and packed: token t's n_in inputs, f32s from
// x_offset + t x_stride, to halves 2 out_offset + t n_in (two a word, the low half first),
// one invocation per 8 inputs (two 16-byte loads, one 16-byte store). The dense route's copy
// of X (ops/f16_copy_x.rs), which matmul_dense.wgsl reads 8 inputs a load: half the bytes its
// tiles read of the f32 values. x_offset, x_stride and out_offset are multiples of 4 and n_in
// of 8, so every load and store is a whole aligned vec4.

struct Params {
    n_in: u32,
    n_tokens: u32,
    x_offset: u32,
    x_stride: u32,
    out_offset: u32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> out: array<vec4<u32>>;

override WG: u32 = 256u;

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) tid: u32,
) {
    // Consecutive invocations take consecutive inputs of a token, so loads and stores are
    // contiguous.
    let i = (wid.y * nwg.x + wid.x) * WG + tid;
    let eighths = p.n_in / 8u;
    if i >= p.n_tokens * eighths {
        return;
    }
    let t = i / eighths;
    let e = i % eighths;
    let at = (p.x_offset + t * p.x_stride) / 4u + 2u * e;
    let a = x[at];
    let b = x[at + 1u];
    out[(p.out_offset + t * (p.n_in / 2u)) / 4u + e] = vec4<u32>(
        pack2x16float(a.xy),
        pack2x16float(a.zw),
        pack2x16float(b.xy),
        pack2x16float(b.zw),
    );
}
