// The 2-byte formats' loads of a half unit (F16, BF16: formats/f16.wgsl, formats/bf16.wgsl,
// whose `decode_raw` widens them): its 8 words as the aligned words that hold them (`a`, `b`
// and `next`: rows of an odd n_in start at 2-byte offsets) and the shift that joins them
// (`join4`).
struct RawHalf {
    a: vec4<u32>,
    b: vec4<u32>,
    next: u32,
    s: u32,
}

fn load_half_raw(blk: u32, unit: u32, h: u32) -> RawHalf {
    let b = blk + 32u * h;
    let i = b >> 2u;
    return RawHalf(wd4(i), wd4(i + 4u), wd(i + 8u), word_shift(b));
}
