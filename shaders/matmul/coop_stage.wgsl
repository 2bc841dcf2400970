// The weight staging of the tensor-core products that decode their weights
// (matmul/matmul_coop.wgsl, matmul/small_m.wgsl). The kernel declares the weight tile `ws`
// (vec4<f16> rows RS apart) and the parameters.

// 16 staged inputs as f16, in named fields rather than an array: a private array indexed in a
// loop may live in local memory, and matmul_coop ran 2-2.5x slower so (docs/PERF.md,
// D-named-registers).
struct Staged {
    c0: vec4<f16>,
    c1: vec4<f16>,
    c2: vec4<f16>,
    c3: vec4<f16>,
}

// The weights are staged in two steps: the kernel loads a half unit's words with `load_w_half`
// (matmul/params.wgsl; the format's `load_half_raw`, held in the named fields of its `RawHalf`)
// a stage ahead, before the current stage's products, and `put_w` decodes them after the
// barrier. Decoding at load made each invocation wait for its loads there, before the
// products, so the loads' latency was not hidden behind the tensor-core work.

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
