// Matvec input: a vector of n_in inputs quantized to int8 in blocks of 32 (the q8 layout,
// `ops::quantize::q8_words` in Rust, written by matvec/quantize_q8.wgsl): n_in / 4 words of
// int8 values, 4 per word, little-endian (input 4k + j is byte j of word k; block b is words
// 8b .. 8b + 8), then n_in / 32 f32 scales d_b as bits; input i stands for q_i * d_b. The
// quants start 16-byte aligned, so 16 inputs are one vec4 load. Read by the dot8_<type>.wgsl
// files, which dot 4 packed inputs with 4 weight codes at a time (dot4I8Packed) and apply the
// scales to the exact integer sums.
//
// Inputs are counted as in the other input files: i from the buffer's start, x_offset (here
// the byte index of the first quant: 4 * the view's word offset) included. n_in is a multiple
// of 32 for every format with a dot8 file, so no step reads past the vector.

@group(0) @binding(2) var<storage, read> xq: array<vec4<u32>>;

// Nothing to set up: the scales' place is a parameter (x_scales).
fn x_begin() {
}

// Inputs i .. i + 16 (i - x_offset a multiple of 16), packed: 4 words of 4 int8 each.
fn xq16(i: u32) -> vec4<u32> {
    return xq[i >> 4u];
}

// Inputs i .. i + 4 (i - x_offset a multiple of 4), packed in one word.
fn xq4(i: u32) -> u32 {
    return xq[i >> 4u][(i >> 2u) & 3u];
}

// The scale d of the block of 32 inputs that holds input i.
fn xd(i: u32) -> f32 {
    let k = p.x_scales + ((i - p.x_offset) >> 5u);
    return bitcast<f32>(xq[k >> 2u][k & 3u]);
}
