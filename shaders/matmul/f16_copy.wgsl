// Rows first_row .. first_row + n_rows of a weight chunk in any format, decoded by the format
// file's `decode_half` (as matmul_coop.wgsl stages them) and rounded to f16 into `out`, row r
// at word 4 out_offset + r * n_in / 2 (out_offset counts 16-byte quads, so each half unit's
// 32 bytes are two quad stores): the layout of an F16 weight of those rows, which
// matmul_dense.wgsl then multiplies in its larger tiles. A prompt block dequantizes each weight
// once instead of once per token tile. n_in is a multiple of 32 (whole units), so every half
// unit (16 weights, 8 words) is inside the row.

struct Params {
    n_in: u32,
    row_bytes: u32,
    first_row: u32,
    n_rows: u32,
    out_offset: u32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> w: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read_write> out: array<vec4<u32>>;
// The weight chunk once more, as words, for the scalar reads of common/blocks.wgsl.
@group(0) @binding(3) var<storage, read> w_words: array<u32>;

override WG: u32 = 256u;

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) tid: u32,
) {
    // One invocation a half unit: consecutive invocations take consecutive halves of a row,
    // so their stores are contiguous.
    let i = (wid.y * nwg.x + wid.x) * WG + tid;
    let halves = p.n_in / 16u;
    if i >= p.n_rows * halves {
        return;
    }
    let row = i / halves;
    let h = i % halves;
    let u = h / 2u;
    let blk = (p.first_row + row) * p.row_bytes + (u / BLOCK_UNITS) * BLOCK_BYTES;
    let q = decode_half(blk, u % BLOCK_UNITS, h % 2u);
    let o = p.out_offset + row * (p.n_in / 8u) + 2u * h;
    out[o] = vec4<u32>(
        pack2x16float(q[0].xy),
        pack2x16float(q[0].zw),
        pack2x16float(q[1].xy),
        pack2x16float(q[1].zw),
    );
    out[o + 1u] = vec4<u32>(
        pack2x16float(q[2].xy),
        pack2x16float(q[2].zw),
        pack2x16float(q[3].xy),
        pack2x16float(q[3].zw),
    );
}
