// y[y_offset + r] = sum_i W[r, i] * x[x_offset + i] for the rows r of one weight chunk.
// W is the format's GPU layout (GGUF's blocks, or planes: common/blocks.wgsl), rows of n_in
// weights (row_bytes each, as GGUF counts them).
//
// Lanes. A row quad is R = 4 consecutive rows. A workgroup takes QUADS consecutive quads side
// by side, WG / QUADS lanes each (`quad`, and lane t in it): several where a quad's lanes
// would leave warps part idle, in dispatches of many rows (`ops::matvec::lanes` chooses;
// gemma3-4b's LM head, n_in 2560 in Q6_K, is 4 quads of 40 lanes in 160). Within a quad,
// lanes are grouped PARTS at a time (the format's constant): a group takes one slice of
// SLICE_UNITS units of 32 weights (one unit for the 32-weight formats; a whole super-block
// for the K formats) and lane `part` of the group reads word(s) `part` of it, so neighbouring
// lanes read neighbouring words of the same block and a subgroup's loads cover a few
// contiguous cache lines (llama.cpp's Vulkan layout) instead of 32 blocks 34-210 bytes
// apart. Group g takes slices g, g + WG / QUADS / PARTS, .. of its quad's 4 rows, one slice
// per loop trip: two or four slices a trip (their loads in flight together) are slower
// (docs/PERF.md, D-one-step-per-trip, a slice being a step there): the kernel is bound by how
// many invocations fit in registers, not by loads in flight. The format's `rows_dot4`
// (matvec/dot_<type>.wgsl, or rows_each.wgsl over its one-row `part_dot`) decodes one part
// of the 4 rows in straight-line code. The per-row partial sums are then reduced over each
// quad's lanes by the entry point (reduce_plain.wgsl: a workgroup-memory tree;
// reduce_subgroup.wgsl: shuffles within the quad's blocks of a subgroup, then one value per
// block), which also writes y.
//
// Files. The input comes through `x4(i)` (inputs i .. i + 4, i counted from the buffer's start,
// so x_offset included), defined by the input file: matvec/x_plain.wgsl (a vector),
// matvec/x_glu.wgsl (act(gate) * up, computed as it is read), matvec/x_norm.wgsl (a residual
// add and RMSNorm, computed as it is read, its scale applied to the row totals through
// `x_scale`) or matvec/x_scaled.wgsl (a norm's z and scale from a residual epilogue's partial
// sums, also through `x_scale`); or, for a vector quantized to two int8 digits per input in
// blocks of 32 (matvec/x_q8.wgsl, read by the dot8_<type>.wgsl files), through `xq16(i)` /
// `xq4(i)` and `xq16_lo(i)` / `xq4_lo(i)` (the packed first and second digits), `dot8` (their
// exact integer dot with weight codes) and `xd(i)` (the value of one unit of that dot: their
// block's scale / 254). The stored value goes through `y_out(row, sum)`, defined by the value
// file: common/out_store.wgsl (the sum) or common/out_bias.wgsl (sum + bias); the weight row a
// dispatch row reads and where it lands go through `w_row` and `y_index`, defined by the place
// file: common/out_one.wgsl (the chunk's rows, into y from y_offset) or common/out_split.wgsl
// (a row range, split over up to 3 outputs). The entry point hands the row totals to
// `store_rows(row0, t, tid, v)`, defined by the store file: matvec/out_rows.wgsl (each row
// through y_out and y_index), matvec/out_glu.wgsl (the GLU epilogue: dispatch rows are gate and
// up rows in pairs, and act(gate) * up is stored; it defines `w_row` itself and takes no value
// or place file) or matvec/out_residual.wgsl (the residual epilogue: each row added to h, then
// the next norm's z and partial sums stored; `w_row` its own too). Every invocation of a
// workgroup calls store_rows, in uniform control flow, with its quad's first row, its lane t in
// the quad, its index tid in the workgroup and its row's total in v for t < R; and before the
// loop `store_begin(row0, t)`, where a store file issues the loads its stores will need.

struct Params {
    n_in: u32,
    n_rows: u32,
    row_bytes: u32,
    x_offset: u32,
    y_offset: u32,
    // Where `up` starts (x_glu.wgsl; x_offset is then the gate's). Unused by x_plain.wgsl.
    up_offset: u32,
    // The bias of this dispatch's row 0 (common/out_bias.wgsl). Unused by out_store.wgsl.
    bias_offset: u32,
    // Word index of the q8 input's scales (x_q8.wgsl). Unused by the other inputs.
    x_scales: u32,
    // Split outputs (common/split_params.wgsl). Unused by out_one.wgsl.
    split: SplitParams,
    // The residual stream and norm of matvec/x_norm.wgsl (unused by the other inputs): where
    // h starts, where the updated h and the normed x are stored, the norm's eps.
    // matvec/x_scaled.wgsl takes h_offset and h_out_offset for where its partial sums start
    // and how many, and eps; matvec/out_residual.wgsl h_offset for h and x_out_offset for
    // where its partial sums go.
    h_offset: u32,
    h_out_offset: u32,
    x_out_offset: u32,
    eps: f32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> w: array<vec4<u32>>;
// Binding 2 (and 5) is the input, declared by the input file with `x_begin` and `x4`.
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
// The weight chunk once more, as words, for the scalar reads of common/blocks.wgsl (a vec4
// load there would fetch 16 bytes to use 4).
@group(0) @binding(4) var<storage, read> w_words: array<u32>;

// Invocations per workgroup, at most 256: a multiple of QUADS, and of PARTS per quad.
override WG: u32 = 64u;
// Row quads per workgroup, side by side (`Lanes::quads` in ops/matvec/mod.rs).
override QUADS: u32 = 1u;
// Rows per quad (`ROWS` in ops/matvec/mod.rs). 8 (two quads in one lane, sharing the loaded
// inputs) is slower but for Q4_K (docs/PERF.md, X-eight-rows: Q8_0 -10%, Q6_K -20%, Q4_K +5%
// at 4096x14336): a lane's registers bound the kernel, so more rows go to more lanes (QUADS).
const R: u32 = 4u;
// Partial sums: R rows x up to 256 slots.
var<workgroup> red: array<f32, 1024>;
// This invocation's quad in the workgroup (set by the entry point; the norm input counts its
// sums of squares from quad 0 only).
var<private> quad: u32;

// The workgroup's first row.
fn first_row(wid: vec3<u32>, nwg: vec3<u32>) -> u32 {
    return (wid.y * nwg.x + wid.x) * R * QUADS;
}

// The largest power of two below n (0 for n = 1): the first stride of a tree over n slots.
fn first_stride(n: u32) -> u32 {
    return select(0u, 1u << (31u - countLeadingZeros(n - 1u)), n > 1u);
}

// Lane t's partial dot products for the quad of rows row0 .. row0 + R (rows past the chunk
// repeat its last row, and a quad past it reads the last row; their sums are never stored).
// tid: the invocation's index in the workgroup (for the input's workgroup-wide work).
fn accumulate(row0: u32, t: u32, tid: u32) -> vec4<f32> {
    x_begin(row0, tid);
    store_begin(row0, t);
    planes_begin();
    let last = p.n_rows - 1u;
    let r0 = w_row(min(row0, last)) * p.row_bytes;
    let r1 = w_row(min(row0 + 1u, last)) * p.row_bytes;
    let r2 = w_row(min(row0 + 2u, last)) * p.row_bytes;
    let r3 = w_row(min(row0 + 3u, last)) * p.row_bytes;
    var acc = vec4<f32>(0.0);
    // K formats: n_in is a multiple of 256, so slices cover the row exactly.
    let slices = (p.n_in + 31u) / 32u / SLICE_UNITS;
    let part = t % PARTS;
    let groups = WG / QUADS / PARTS;
    var s = t / PARTS;
    for (; s < slices; s += groups) {
        acc += rows_dot(r0, r1, r2, r3, s, part);
    }
    return acc;
}

// Part `part` of slice `s` of the 4 rows starting at byte offsets r0 .. r3.
fn rows_dot(r0: u32, r1: u32, r2: u32, r3: u32, s: u32, part: u32) -> vec4<f32> {
    let u = s * SLICE_UNITS;
    let xb = p.x_offset + 32u * u;
    let blk = (u / BLOCK_UNITS) * BLOCK_BYTES;
    let unit = u % BLOCK_UNITS;
    return rows_dot4(vec4<u32>(r0, r1, r2, r3) + blk, unit, part, xb);
}

