// Embedding gather: out[out_offset + t*n_in + i] = scale * E[ids[id_offset + t], i] for token t
// (workgroup t). E is one row chunk [first_row, first_row + n_rows) of a GGUF table in any
// format (decoded by the format file); a workgroup whose id is outside the chunk does nothing,
// so a table split over chunks is one dispatch per chunk with the same grid.

struct Params {
    n_in: u32,
    first_row: u32,
    n_rows: u32,
    row_bytes: u32,
    id_offset: u32,
    n_tokens: u32,
    out_offset: u32,
    scale: f32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> w: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read> ids: array<u32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;
// The weight chunk once more, as words, for the scalar reads of common/blocks.wgsl (a vec4
// load there would fetch 16 bytes to use 4).
@group(0) @binding(4) var<storage, read> w_words: array<u32>;

override WG: u32 = 64u;

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) tid: u32,
) {
    let t = wid.y * nwg.x + wid.x;
    if t >= p.n_tokens {
        return;
    }
    let id = ids[p.id_offset + t];
    if id < p.first_row || id - p.first_row >= p.n_rows {
        return;
    }
    let row_base = (id - p.first_row) * p.row_bytes;
    let units = (p.n_in + 31u) / 32u;
    let o = p.out_offset + t * p.n_in;
    for (var u = tid; u < units; u += WG) {
        decode_unit(row_base + (u / BLOCK_UNITS) * BLOCK_BYTES, u % BLOCK_UNITS);
        let valid = min(32u, p.n_in - 32u * u);
        for (var j = 0u; j < valid; j++) {
            out[o + 32u * u + j] = unit_w[j] * p.scale;
        }
    }
}
