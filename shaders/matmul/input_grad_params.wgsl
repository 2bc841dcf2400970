// The input gradient's contract, shared by `input_grad.wgsl` (f32 FMAs) and
// `input_grad_coop.wgsl` (tensor cores): dX[t, i] (+)= sum_r dY[t, r] W[row0 + r, i] over the
// n_rows rows of one weight chunk a dispatch sums. The bindings take the forward's names (the
// product reads dY as the forward reads X, and writes dX as it writes Y), so the tensor-core
// kernel's matmul/coop_io.wgsl addresses them as it does the forward's.

struct Params {
    n_in: u32,
    // Weight rows summed by this dispatch, from chunk row `row0`.
    n_rows: u32,
    row_bytes: u32,
    n_tokens: u32,
    row0: u32,
    // dY[0, 0] of this dispatch (its first row's column).
    dy_offset: u32,
    dy_stride: u32,
    dx_offset: u32,
    dx_stride: u32,
    accumulate: u32,
    // Split over the rows (the grid's z, ops/split_sum.rs): split z sums rows
    // z rows_per_split .. of the dispatch's and writes split_stride z elements after
    // dx_offset. One split: rows_per_split = n_rows, z = 0.
    rows_per_split: u32,
    split_stride: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> w: array<vec4<u32>>;
// dY[t, r] is x[dy_offset + t * dy_stride + r].
@group(0) @binding(2) var<storage, read> x: array<f32>;
// dX[t, i] is y[dx_offset + t * dx_stride + i].
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
// The weight chunk once more, as words, for the scalar reads of common/blocks.wgsl.
@group(0) @binding(4) var<storage, read> w_words: array<u32>;

// Half `dh` (16 weights) of unit `u` of the row at byte `wrow`, with zeros past n_in (a
// partial last unit of F32/F16/BF16) and where `ok` is false (a row past the dispatch's or a
// unit past the row: the caller passes an existing row and unit so the reads stay in bounds).
fn stage_w_quarter(wrow: u32, u: u32, dh: u32, ok: bool) -> array<vec4<f32>, 4> {
    let q = decode_half(wrow + (u / BLOCK_UNITS) * BLOCK_BYTES, u % BLOCK_UNITS, dh);
    let k = vec4<u32>(32u * u + 16u * dh) + vec4<u32>(0u, 1u, 2u, 3u);
    let n = vec4<u32>(p.n_in);
    let keep = vec4<bool>(ok);
    return array<vec4<f32>, 4>(
        select(vec4<f32>(0.0), q[0], (k < n) & keep),
        select(vec4<f32>(0.0), q[1], (k + vec4<u32>(4u) < n) & keep),
        select(vec4<f32>(0.0), q[2], (k + vec4<u32>(8u) < n) & keep),
        select(vec4<f32>(0.0), q[3], (k + vec4<u32>(12u) < n) & keep),
    );
}
