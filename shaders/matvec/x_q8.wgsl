// Matvec input: a vector of n_in inputs as two int8 digits of a per-block scale, in blocks
// of 32 (the q8 layout, `ops::quantize` in Rust, written by matvec/quantize_q8.wgsl):
// n_in / 4 words of first digits q1, 4 per word, little-endian (input 4k + j is byte j of
// word k; block b is words 8b .. 8b + 8), then n_in / 4 words of second digits q2 in the
// same order, then n_in / 32 f32 scales d_b as bits; input i stands for
// d_b (q1_i + q2_i / 254) = (d_b / 254) (254 q1_i + q2_i). Both planes start 16-byte
// aligned, so 16 inputs of a digit are one vec4 load. Read by the dot8_<type>.wgsl files,
// which dot 4 weight codes with 4 inputs' two digits at a time (`dot8`: dot4I8Packed twice)
// and apply the scales to the exact integer sums.
//
// Inputs are counted as in the other input files: i from the buffer's start, x_offset (here
// the byte index of the first quant: 4 * the view's word offset) included; the second
// digits are n_in bytes further. n_in is a multiple of 32 for every format with a dot8 file,
// so no slice reads past a plane.

@group(0) @binding(2) var<storage, read> xq: array<vec4<u32>>;

// Nothing to set up: the planes' places follow from x_offset, n_in and x_scales.
fn x_begin(row0: u32, tid: u32) {
}

// First digits of inputs i .. i + 16 (i - x_offset a multiple of 16): 4 words of 4 int8.
fn xq16(i: u32) -> vec4<u32> {
    return xq[i >> 4u];
}

// Second digits of inputs i .. i + 16, as `xq16`.
fn xq16_lo(i: u32) -> vec4<u32> {
    return xq[(i + p.n_in) >> 4u];
}

// First digits of inputs i .. i + 4 (i - x_offset a multiple of 4), packed in one word.
fn xq4(i: u32) -> u32 {
    return xq[i >> 4u][(i >> 2u) & 3u];
}

// Second digits of inputs i .. i + 4, as `xq4`.
fn xq4_lo(i: u32) -> u32 {
    let k = i + p.n_in;
    return xq[k >> 4u][(k >> 2u) & 3u];
}

// The value of one unit of a `dot8` sum over inputs of the block that holds input i:
// d_b / 254 (two roundings, 2^-24 relative each: 1 / 254 and the product).
fn xd(i: u32) -> f32 {
    let k = p.x_scales + ((i - p.x_offset) >> 5u);
    return bitcast<f32>(xq[k >> 2u][k & 3u]) * (1.0 / 254.0);
}

// 4 weight codes (int8, one per byte of `c`) dotted with 4 inputs' digits (`x1` first, `x2`
// second): 254 (c . q1) + (c . q2), the sum over them of code * (254 q1 + q2), in units of
// d_b / 254 (`xd`). One i32 per row and sub-block accumulates these, so the two digits never
// need separate sums.
//
// Exact in i32, for every dot8 file: 254 q1 + q2 is at most 254 * 127 + 127 = 32385 in
// magnitude, and no sum covers more than one input block (32 inputs; Q8_0 takes 16 a lane,
// Q4_K and Q6_K 16 per sub-block, Q5_1 8, Q5_K 4). Codes are at most 128 in magnitude (Q8_0's
// int8; Q4_0 / Q4_1 / Q4_K nibbles 0..15, Q5_0 / Q5_1 / Q5_K 0..31, Q6_K 0..63), so a sum of
// codes times inputs is at most 32 * 128 * 32385 = 132,648,960; a sum of inputs (code 1)
// times an offset (8, 16 or 32) at most 32 * 32 * 32385 = 33,162,240; their difference
// 165,811,200, under 2^31 = 2,147,483,648 by 12x. Each dot4I8Packed is at most
// 4 * 128 * 127 = 65024, times 254: 16,516,096.
fn dot8(c: u32, x1: u32, x2: u32) -> i32 {
    return 254 * dot4I8Packed(c, x1) + dot4I8Packed(c, x2);
}

// Word `q` of 8 nibbles (codes 0..15) dotted with 8 inputs' digits: its low nibbles with
// inputs (`lo1`, `lo2`), its high nibbles with (`hi1`, `hi2`), as `dot8`
// (matvec/dot8_nibbles.wgsl).
fn nibble_dot8(q: u32, lo1: u32, lo2: u32, hi1: u32, hi2: u32) -> i32 {
    return dot8(q & 0x0f0f0f0fu, lo1, lo2) + dot8((q >> 4u) & 0x0f0f0f0fu, hi1, hi2);
}

// The factor of the row totals: none.
fn x_scale(tid: u32) -> f32 {
    return 1.0;
}
