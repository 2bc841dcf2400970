// Q5_0: GGUF's 22-byte block (f16 d, u32 qh of fifth bits, 16 bytes of nibbles) stored in three
// planes: plane 0 the nibbles (one vec4 per block), plane 1 qh, plane 2 the f16 d. Weight
// j < 16: low nibble of byte j with bit j of qh; weight j + 16: high nibble with bit j + 16.
// w = d * (q - 16).
const BLOCK_BYTES: u32 = 22u;
const BLOCK_UNITS: u32 = 1u;

// Bits k .. k + 3 of qh, as the fifth bit (16) of 4 weights.
fn q5_high(qh: u32, k: u32) -> vec4<u32> {
    let h = qh >> k;
    return (vec4<u32>(h, h >> 1u, h >> 2u, h >> 3u) & vec4<u32>(1u)) << vec4<u32>(4u);
}

// Weights 4k .. 4k + 3 (low nibbles) and 16 + 4k .. (high nibbles) of a block, as q - 16.
fn q5_0_lo(q: vec4<u32>, qh: u32, k: u32) -> vec4<f32> {
    return vec4<f32>(unpack4xU8(q[k] & 0x0f0f0f0fu) | q5_high(qh, 4u * k)) - 16.0;
}

fn q5_0_hi(q: vec4<u32>, qh: u32, k: u32) -> vec4<f32> {
    return vec4<f32>(unpack4xU8((q[k] >> 4u) & 0x0f0f0f0fu) | q5_high(qh, 16u + 4u * k)) - 16.0;
}

fn decode_unit(blk: u32, unit: u32) {
    let bi = blk / BLOCK_BYTES;
    let d = plane_f16(2u, bi);
    let qh = plane_u32(1u, bi);
    let q = w[1u + bi];
    for (var k = 0u; k < 4u; k++) {
        let lo = d * q5_0_lo(q, qh, k);
        let hi = d * q5_0_hi(q, qh, k);
        for (var j = 0u; j < 4u; j++) {
            unit_w[4u * k + j] = lo[j];
            unit_w[16u + 4u * k + j] = hi[j];
        }
    }
}
