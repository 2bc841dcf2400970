// Q5_0's and Q5_1's 5-bit codes: 16 bytes of nibbles and a u32 `qh` of fifth bits. Code j < 16
// is the low nibble of byte j with bit j of qh; code j + 16 the high nibble with bit j + 16.
// One copy, included before either format's decoder.

// Bits 0..3 of `v` moved to bit 0 of bytes 0..3: one multiply puts bit i of v at bits
// i + 7j (j < 4), all distinct so nothing carries, and bit i + 7i = 8i is byte i's bit 0.
fn spread4(v: u32) -> u32 {
    return ((v & 0xfu) * 0x00204081u) & 0x01010101u;
}

// Codes 4i..4i+3 (x) and 16+4i..16+4i+3 (y), one per byte, from word i of the nibbles (`q`).
fn q5_codes(q: u32, qh: u32, i: u32) -> vec2<u32> {
    let lo = (q & 0x0f0f0f0fu) | (spread4(qh >> (4u * i)) << 4u);
    let hi = ((q >> 4u) & 0x0f0f0f0fu) | (spread4(qh >> (16u + 4u * i)) << 4u);
    return vec2<u32>(lo, hi);
}
