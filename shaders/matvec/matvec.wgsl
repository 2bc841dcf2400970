// y[y_offset + r] = sum_i W[r, i] * x[x_offset + i] for the rows r of one weight chunk.
// W is GGUF's layout: rows of n_in weights, row_bytes each. A workgroup takes R = 4
// consecutive rows; invocation tid takes units (32 weights) tid, tid + WG, .. of all 4 rows.
// The format's `unit_dot` (matvec/dot_<type>.wgsl) decodes one unit and dots it with x in
// straight-line code (no private arrays, no inner loops), so all of a unit's loads are in
// flight together; the 4 rows are 4 independent calls. The per-row partial sums are then
// reduced across the workgroup by the entry point (reduce_plain.wgsl: workgroup-memory tree;
// reduce_subgroup.wgsl: subgroupAdd, then one value per subgroup), which also writes y.

struct Params {
    n_in: u32,
    n_rows: u32,
    row_bytes: u32,
    x_offset: u32,
    y_offset: u32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> w: array<u32>;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;

// Invocations per workgroup: a power of two, at most 256.
override WG: u32 = 64u;
const R: u32 = 4u;
// Partial sums: R rows x up to 256 slots.
var<workgroup> red: array<f32, 1024>;

// End of x (exclusive) for `x4`: a partial last unit of an F32/F16 row reads zeros past it.
var<private> x_end: u32;

fn x1(i: u32) -> f32 {
    return select(0.0, x[min(i, x_end - 1u)], i < x_end);
}

// x[i .. i + 4], zero past n_in.
fn x4(i: u32) -> vec4<f32> {
    if i + 3u < x_end {
        return vec4<f32>(x[i], x[i + 1u], x[i + 2u], x[i + 3u]);
    }
    return vec4<f32>(x1(i), x1(i + 1u), x1(i + 2u), x1(i + 3u));
}

fn first_row(wid: vec3<u32>, nwg: vec3<u32>) -> u32 {
    return (wid.y * nwg.x + wid.x) * R;
}

// This invocation's partial dot products for rows row0 .. row0 + R (rows past the chunk
// repeat its last row; their sums are never stored).
fn accumulate(row0: u32, tid: u32) -> vec4<f32> {
    x_end = p.x_offset + p.n_in;
    let last = p.n_rows - 1u;
    let r0 = row0 * p.row_bytes;
    let r1 = min(row0 + 1u, last) * p.row_bytes;
    let r2 = min(row0 + 2u, last) * p.row_bytes;
    let r3 = min(row0 + 3u, last) * p.row_bytes;
    var acc = vec4<f32>(0.0);
    let units = (p.n_in + 31u) / 32u;
    for (var u = tid; u < units; u += WG) {
        let xb = p.x_offset + 32u * u;
        let blk = (u / BLOCK_UNITS) * BLOCK_BYTES;
        let unit = u % BLOCK_UNITS;
        acc += vec4<f32>(
            unit_dot(r0 + blk, unit, xb),
            unit_dot(r1 + blk, unit, xb),
            unit_dot(r2 + blk, unit, xb),
            unit_dot(r3 + blk, unit, xb),
        );
    }
    return acc;
}

fn store_rows(row0: u32, tid: u32, v: f32) {
    if tid < R && row0 + tid < p.n_rows {
        y[p.y_offset + row0 + tid] = v;
    }
}
