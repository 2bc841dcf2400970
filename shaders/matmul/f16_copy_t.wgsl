// A weight chunk's rows decoded by the format file's `decode_half` (as f16_copy.wgsl) and
// rounded to f16 into `out` TRANSPOSED: weight element (row, input i) at half i * N + row of
// the whole weight's N rows, the layout of an F16 weight of n_in rows of N inputs (W^T). A
// training step's input gradient dX = dY W is then the forward product dY (W^T)^T on the
// dense tensor-core kernel, with its larger tiles, instead of the input-gradient kernel.
//
// One invocation a pair of rows (2 q, 2 q + 1) and a half unit h (16 inputs): it decodes both
// rows' 16 values and stores 16 words, word e holding (row 2q, row 2q + 1) of input 16 h + e
// (two f16 a word, the lower row in the low half). Consecutive invocations take consecutive
// row pairs of one half unit, so each of the 16 stores is contiguous across them. n_in is a
// multiple of 32 (whole units) and the chunk's rows, its first row in the weight and N even.

struct Params {
    n_in: u32,
    row_bytes: u32,
    // The chunk's first row to copy and the pairs of rows to copy.
    first_row: u32,
    n_pairs: u32,
    // Word of `out` of input 0 of that first row, and words an input's row of W^T takes (N / 2).
    out_offset: u32,
    out_stride: u32,
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> w: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read_write> out: array<u32>;
// The weight chunk once more, as words, for the scalar reads of common/blocks.wgsl.
@group(0) @binding(3) var<storage, read> w_words: array<u32>;

override WG: u32 = 256u;

// Inputs 4 k .. 4 k + 3 of the half unit: rows a and b, one word each.
fn put4(at: u32, a: vec4<f32>, b: vec4<f32>) {
    out[at] = pack2x16float(vec2<f32>(a.x, b.x));
    out[at + p.out_stride] = pack2x16float(vec2<f32>(a.y, b.y));
    out[at + 2u * p.out_stride] = pack2x16float(vec2<f32>(a.z, b.z));
    out[at + 3u * p.out_stride] = pack2x16float(vec2<f32>(a.w, b.w));
}

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) tid: u32,
) {
    let i = (wid.y * nwg.x + wid.x) * WG + tid;
    let halves = p.n_in / 16u;
    if i >= p.n_pairs * halves {
        return;
    }
    let q = i % p.n_pairs;
    let h = i / p.n_pairs;
    let u = h / 2u;
    let row = p.first_row + 2u * q;
    let unit_at = (u / BLOCK_UNITS) * BLOCK_BYTES;
    let a = decode_half(row * p.row_bytes + unit_at, u % BLOCK_UNITS, h % 2u);
    let b = decode_half((row + 1u) * p.row_bytes + unit_at, u % BLOCK_UNITS, h % 2u);
    let at = p.out_offset + 16u * h * p.out_stride + q;
    put4(at, a[0], b[0]);
    put4(at + 4u * p.out_stride, a[1], b[1]);
    put4(at + 8u * p.out_stride, a[2], b[2]);
    put4(at + 12u * p.out_stride, a[3], b[3]);
}
