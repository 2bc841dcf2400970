// Byte-level reads of GGUF blocks from the weight words `w` (declared by the kernel that
// includes this file). Blocks of 18, 22, 34, 110 and 210 bytes start at any byte offset, so
// words are assembled from two aligned loads. All f16 fields sit at even offsets.

// One decoded unit: 32 consecutive weights of a block, written by `decode_unit`.
var<private> unit_w: array<f32, 32>;

fn load_u8(b: u32) -> u32 {
    return (w[b >> 2u] >> ((b & 3u) * 8u)) & 0xffu;
}

// Little-endian u32 at any byte offset: two aligned loads and a funnel shift, no branch (so
// unrolled callers keep all their loads in flight; at s = 0 the shifted word is discarded).
fn load_u32(b: u32) -> u32 {
    let i = b >> 2u;
    let s = (b & 3u) * 8u;
    let lo = w[i];
    let hi = w[i + 1u];
    return select((lo >> s) | (hi << ((32u - s) & 31u)), lo, s == 0u);
}

// The low nibbles (shift 0) or high nibbles (shift 4) of the 4 bytes of `q`, as floats.
fn nibbles4(q: u32, shift: u32) -> vec4<f32> {
    return vec4<f32>(unpack4xU8((q >> shift) & 0x0f0f0f0fu));
}

// f16 at an even byte offset, widened to f32 (no SHADER_F16 needed).
fn load_f16(b: u32) -> f32 {
    let word = w[b >> 2u] >> ((b & 2u) * 8u);
    return unpack2x16float(word & 0xffffu).x;
}

// Byte `k` (0..3) of `word`, as a signed int8.
fn sbyte(word: u32, k: u32) -> i32 {
    return bitcast<i32>(word << (24u - 8u * k)) >> 24u;
}

// Byte `k` (0..3) of `word`, unsigned.
fn ubyte(word: u32, k: u32) -> u32 {
    return (word >> (8u * k)) & 0xffu;
}
