// The matmul's backward through its weight: dX[t, i] (+)= sum_r dY[t, r] W[row0 + r, i] over
// the n_rows rows r of one weight chunk that this dispatch sums (W stays in its block format,
// decoded by the format file's `decode_half` as the forward decodes it). dY[t, r] is
// dy[dy_offset + t * dy_stride + r]; dX[t, i] is dx[dx_offset + t * dx_stride + i], which
// this dispatch adds to when `accumulate` is set (a later chunk's rows, or a gradient that
// another product already wrote) and overwrites otherwise.
//
// Workgroup (input tile, token tile) of 128 computes 64 inputs x 64 tokens through
// matmul/grad_tile.wgsl, walking the weight's rows BK = 32 at a time. Per step:
// - `ta` (inputs x rows): invocation i decodes the 16 weights (i % 4) * 16 .. of the tile's
//   64 inputs (two units) in row i / 4 of the step, and stores them transposed.
// - `tb` (tokens x rows): invocation i reads row i % 32 of dY for tokens i / 32 + 4m (m <
//   16), as the forward reads X: each subgroup load is 32 consecutive floats of one dY row.

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
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> w: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read> dy: array<f32>;
@group(0) @binding(3) var<storage, read_write> dx: array<f32>;
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

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(local_invocation_index) tid: u32,
) {
    let in0 = wid.x * TM;
    let tok0 = wid.y * TN;
    let units = (p.n_in + BK - 1u) / BK;

    // Weight staging role: step row `sr`, the tile's inputs 16 sq .. 16 sq + 15.
    let sr = tid / 4u;
    let sq = tid % 4u;
    let u = 2u * wid.x + sq / 2u;
    let u_ok = u < units;
    let uc = min(u, units - 1u);
    // dY staging role.
    let yc = tid % BK;
    let yt = tid / BK;
    // Compute role.
    let tr = tid % 8u;
    let tt = tid / 8u;
    for (var a = 0u; a < 8u; a++) {
        acc[a] = vec4<f32>(0.0);
    }

    let steps = (p.n_rows + BK - 1u) / BK;
    for (var s = 0u; s < steps; s++) {
        let r0 = BK * s;
        let row_ok = r0 + sr < p.n_rows;
        let wrow = (p.row0 + min(r0 + sr, p.n_rows - 1u)) * p.row_bytes;
        let q = stage_w_quarter(wrow, uc, sq % 2u, row_ok && u_ok);
        for (var c = 0u; c < 4u; c++) {
            for (var j = 0u; j < 4u; j++) {
                ta_set(16u * sq + 4u * c + j, sr, q[c][j]);
            }
        }
        let in_r = r0 + yc < p.n_rows;
        for (var m = 0u; m < TN / 4u; m++) {
            let t = yt + 4u * m;
            var v = 0.0;
            if in_r && tok0 + t < p.n_tokens {
                v = dy[p.dy_offset + (tok0 + t) * p.dy_stride + r0 + yc];
            }
            tb_set(t, yc, v);
        }
        workgroupBarrier();
        tile_products(tr, tt);
        workgroupBarrier();
    }

    for (var a = 0u; a < 8u; a++) {
        let i = in0 + tr + 8u * a;
        for (var b = 0u; b < 4u; b++) {
            let t = tok0 + tt + 16u * b;
            if i < p.n_in && t < p.n_tokens {
                let at = p.dx_offset + t * p.dx_stride + i;
                var v = acc[a][b];
                if p.accumulate != 0u {
                    v = dx[at] + v;
                }
                dx[at] = v;
            }
        }
    }
}
