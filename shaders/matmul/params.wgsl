// The prompt matmul's contract, shared by `matmul.wgsl` (f32 FMAs) and `matmul_coop.wgsl`
// (tensor cores): Y[t, r] = sum_i X[t, i] * W[r, i] for the rows r of one weight chunk.
// X row t starts at x_offset + t * x_stride; Y[t, r] is y[y_offset + t * y_stride + r], as
// `y_out(r, sum)` of the value file gives it (common/out_store.wgsl, common/out_bias.wgsl),
// or, with split outputs, rows row_base.. of the chunk go where common/out_split.wgsl says
// (the place file: `w_row`, `y_index`, `y_tile`; common/out_one.wgsl otherwise). Both
// kernels stage the weight tile through `stage_w_half` below.

struct Params {
    n_in: u32,
    n_rows: u32,
    row_bytes: u32,
    n_tokens: u32,
    x_offset: u32,
    x_stride: u32,
    y_offset: u32,
    y_stride: u32,
    // The bias of this dispatch's row 0 (common/out_bias.wgsl). Unused by out_store.wgsl.
    bias_offset: u32,
    // Split K (the tensor-core kernel only; 0 otherwise): workgroup z sums units
    // z k_units .. (z + 1) k_units of the inputs and stores its partial sums k_slice further
    // into y than split 0 (a scratch that matmul/reduce_k.wgsl then adds up).
    k_units: u32,
    k_slice: u32,
    // matmul_dense.wgsl only: 1 adds the product into Y instead of storing it.
    accumulate: u32,
    // Split outputs (common/split_params.wgsl). Unused by out_one.wgsl.
    split: SplitParams,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> w: array<vec4<u32>>;
// X, at binding 2, is declared by each kernel: as f32s, or as vec4s by matmul_dense.wgsl.
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
// The weight chunk once more, as words, for the scalar reads of common/blocks.wgsl (a vec4
// load there would fetch 16 bytes to use 4).
@group(0) @binding(4) var<storage, read> w_words: array<u32>;

// The weight tile's staging, the same in the three kernels: half `dh` (16 weights) of unit `u`
// of the row at byte `wrow`, decoded by the format file's `decode_half`, with zeros for inputs
// past n_in (a partial last unit of F32/F16/BF16) and for a row past the chunk (`row_ok`
// false: the caller passes the chunk's last row so the reads stay in bounds).
fn stage_w_half(wrow: u32, u: u32, dh: u32, row_ok: bool) -> array<vec4<f32>, 4> {
    return decode_w_half(load_w_half(wrow, u, dh, row_ok), dh);
}

// A half unit as loaded, not yet decoded: the format's loaded words (`RawHalf` of the format
// file), the unit within its block, and how many of its 16 weights count (0 past the chunk's
// rows; fewer than 16 in a partial last unit).
struct WeightHalf {
    raw: RawHalf,
    unit: u32,
    n_ok: u32,
}

// `stage_w_half`'s loads: the tensor-core matmuls issue them a stage ahead and decode after
// the barrier (matmul/coop_stage.wgsl).
fn load_w_half(wrow: u32, u: u32, dh: u32, row_ok: bool) -> WeightHalf {
    let unit = u % BLOCK_UNITS;
    let k0 = min(32u * u + 16u * dh, p.n_in);
    let n_ok = select(0u, min(p.n_in - k0, 16u), row_ok);
    return WeightHalf(load_half_raw(wrow + (u / BLOCK_UNITS) * BLOCK_BYTES, unit, dh), unit, n_ok);
}

// `stage_w_half`'s arithmetic on what `load_w_half` loaded: the format's decode, weights
// n_ok.. zeroed.
fn decode_w_half(q: WeightHalf, dh: u32) -> array<vec4<f32>, 4> {
    let v = decode_raw(q.raw, q.unit, dh);
    // Written out, not looped: constant indices keep the array in registers.
    let e = vec4<u32>(0u, 1u, 2u, 3u);
    let n = vec4<u32>(q.n_ok);
    return array<vec4<f32>, 4>(
        select(vec4<f32>(0.0), v[0], e < n),
        select(vec4<f32>(0.0), v[1], e + vec4<u32>(4u) < n),
        select(vec4<f32>(0.0), v[2], e + vec4<u32>(8u) < n),
        select(vec4<f32>(0.0), v[3], e + vec4<u32>(12u) < n),
    );
}
