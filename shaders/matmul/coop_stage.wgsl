// The weight and input staging of the tensor-core products that decode their weights
// (matmul/matmul_coop.wgsl, matmul/small_m.wgsl). The kernel declares the weight tile `ws`
// (vec4<f16> rows RS apart) and the parameters. Both kernels load a stage into registers
// before the current stage's products and turn it into f16 tiles only after the barrier:
// any arithmetic on a loaded value at load time (a decode, a rounding, a mask) makes the
// invocation wait for that load there, before the products, and the latency goes unhidden.

// 4 quads of staged inputs as loaded (f32), in named fields rather than an array: a private
// array indexed in a loop may live in local memory, and matmul_coop ran 2-2.5x slower so
// (docs/PERF.md, D-named-registers). They are masked and rounded to f16 where they are stored
// (`staged_quad`): inputs n_k.. of every quad (past n_in; the four quads share their inputs'
// positions) and quads n_q.. (past the last token: validity only falls along the quads) are
// stored as zeros.
struct StagedX {
    c0: vec4<f32>,
    c1: vec4<f32>,
    c2: vec4<f32>,
    c3: vec4<f32>,
    n_k: u32,
    n_q: u32,
}

// Quad `m` (its value `v`, field c<m> of `s`) as the kernel stores it: masked, rounded to f16.
fn staged_quad(s: StagedX, v: vec4<f32>, m: u32) -> vec4<f16> {
    let ok = (vec4<u32>(0u, 1u, 2u, 3u) < vec4<u32>(s.n_k)) & vec4<bool>(m < s.n_q);
    return vec4<f16>(select(vec4<f32>(0.0), v, ok));
}

// The weights are staged in two steps: the kernel loads a half unit's words with `load_w_half`
// (matmul/params.wgsl; the format's `load_half_raw`, held in the named fields of its
// `RawHalf`) a stage ahead, and `put_w` decodes them after the barrier.

// Decodes half dh of row dr's loaded weights (`decode_w_half`), rounds them to f16 and stores
// them at column `col` (vec4s) of the weight tile.
fn put_w(q: WeightHalf, dr: u32, dh: u32, col: u32) {
    let v = decode_w_half(q, dh);
    let at = dr * RS + col + 4u * dh;
    ws[at] = vec4<f16>(v[0]);
    ws[at + 1u] = vec4<f16>(v[1]);
    ws[at + 2u] = vec4<f16>(v[2]);
    ws[at + 3u] = vec4<f16>(v[3]);
}
