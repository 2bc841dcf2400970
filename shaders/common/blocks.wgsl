// Reads of weight blocks from `w: array<vec4<u32>>` and `w_words: array<u32>`, two bindings of
// the same buffer (declared by the kernel that includes this file; weight buffers are padded
// to 16 bytes). Kernels that can load 16 bytes at once index
// `w` directly; the helpers here read words and bytes. Blocks kept in GGUF's layout (F32,
// F16, Q4_K, ...) may start at any byte offset, so words are assembled from two aligned
// loads; all f16 fields sit at even offsets. Formats with planes (`GpuFormat::planes`) are
// stored split by field, each field of every block of a chunk in one 16-byte aligned plane
// (see `plane_start`).

// Word `i` (4-byte unit) of the weight buffer, through the kernel's `w_words` binding of the
// same buffer.
fn wd(i: u32) -> u32 {
    return w_words[i];
}

// Planar chunks begin with a header vec4 whose x, y, z are the vec4 indices where planes 1, 2
// and 3 start; plane 0 starts right after the header, at index 1. A kernel that reads many
// blocks calls `planes_begin` once, so later block reads do not wait on the header first.
var<private> plane_starts: vec3<u32>;
var<private> planes_cached: bool;

fn planes_begin() {
    plane_starts = vec3<u32>(w_words[0], w_words[1], w_words[2]);
    planes_cached = true;
}

fn plane_start(k: u32) -> u32 {
    if k == 0u {
        return 1u;
    }
    if planes_cached {
        return plane_starts[k - 1u];
    }
    return w_words[k - 1u];
}

// The 4-byte field of block `bi` in plane `k`.
fn plane_u32(k: u32, bi: u32) -> u32 {
    return wd(4u * plane_start(k) + bi);
}

// The f16 field of block `bi` in plane `k` (two blocks per word), widened to f32.
fn plane_f16(k: u32, bi: u32) -> f32 {
    return f16_of(plane_f16_word(k, bi), 2u * bi);
}

// The word of plane `k` that holds block `bi`'s f16 field (`f16_of(word, 2 bi)` widens it).
fn plane_f16_word(k: u32, bi: u32) -> u32 {
    return wd(4u * plane_start(k) + (bi >> 1u));
}

// One decoded unit: 32 consecutive weights of a block, written by `decode_unit`.
var<private> unit_w: array<f32, 32>;

// The reads below come in two steps where a kernel wants them apart: the aligned loads
// (`wd`, `wd4`) and the arithmetic on the loaded words (`byte_of`, `f16_of`, `join_u32`,
// `join4`). A kernel that issues its loads long before it needs the values (the tensor-core
// matmuls' `load_half_raw` staging) holds the loaded words and does the arithmetic later, so
// the invocation does not wait on the loads at the point of issue.

// Words i .. i + 3 of the weight buffer (one scalar load each: any alignment).
fn wd4(i: u32) -> vec4<u32> {
    return vec4<u32>(wd(i), wd(i + 1u), wd(i + 2u), wd(i + 3u));
}

fn load_u8(b: u32) -> u32 {
    return byte_of(wd(b >> 2u), b);
}

// The byte at offset `b` from its word (wd(b / 4)).
fn byte_of(word: u32, b: u32) -> u32 {
    return (word >> ((b & 3u) * 8u)) & 0xffu;
}

// The bit shift `join_u32` takes for a u32 at byte offset `b`.
fn word_shift(b: u32) -> u32 {
    return (b & 3u) * 8u;
}

// Little-endian u32 at any byte offset: two aligned loads and a funnel shift, no branch (so
// unrolled callers keep all their loads in flight; at s = 0 the shifted word is discarded).
fn load_u32(b: u32) -> u32 {
    let i = b >> 2u;
    return join_u32(wd(i), wd(i + 1u), word_shift(b));
}

// The u32 at bit shift `s` (`word_shift`) into the aligned words lo, hi.
fn join_u32(lo: u32, hi: u32, s: u32) -> u32 {
    return select((lo >> s) | (hi << ((32u - s) & 31u)), lo, s == 0u);
}

// The 4 consecutive u32 at bit shift `s` into the aligned words `lo` (4) and `hi` (the next):
// load_u32 of 4 consecutive words, from wd4(i) and wd(i + 4).
fn join4(lo: vec4<u32>, hi: u32, s: u32) -> vec4<u32> {
    return vec4<u32>(
        join_u32(lo.x, lo.y, s),
        join_u32(lo.y, lo.z, s),
        join_u32(lo.z, lo.w, s),
        join_u32(lo.w, hi, s),
    );
}

// The low nibbles (shift 0) or high nibbles (shift 4) of the 4 bytes of `q`, as floats.
fn nibbles4(q: u32, shift: u32) -> vec4<f32> {
    return vec4<f32>(unpack4xU8((q >> shift) & 0x0f0f0f0fu));
}

// f16 at an even byte offset, widened to f32 (no SHADER_F16 needed).
fn load_f16(b: u32) -> f32 {
    return f16_of(wd(b >> 2u), b);
}

// The f16 at even byte offset `b` from its word (wd(b / 4)), widened to f32.
fn f16_of(word: u32, b: u32) -> f32 {
    return unpack2x16float((word >> ((b & 2u) * 8u)) & 0xffffu).x;
}

// Byte `k` (0..3) of `word`, as a signed int8.
fn sbyte(word: u32, k: u32) -> i32 {
    return bitcast<i32>(word << (24u - 8u * k)) >> 24u;
}

// Byte `k` (0..3) of `word`, unsigned.
fn ubyte(word: u32, k: u32) -> u32 {
    return (word >> (8u * k)) & 0xffu;
}
