// Q5_1: 24 bytes = f16 d, f16 m, u32 qh (fifth bits), 16 bytes of nibbles; codes as in
// formats/q5_codes.wgsl. w = q * d + m (the quant crate's order, so weights match exactly).
const BLOCK_BYTES: u32 = 24u;
const BLOCK_UNITS: u32 = 1u;

fn decode_unit(blk: u32, unit: u32) {
    let d = load_f16(blk);
    let m = load_f16(blk + 2u);
    let qh = load_u32(blk + 4u);
    for (var i = 0u; i < 4u; i++) {
        let c = q5_codes(load_u32(blk + 8u + 4u * i), qh, i);
        for (var k = 0u; k < 4u; k++) {
            unit_w[4u * i + k] = f32(ubyte(c.x, k)) * d + m;
            unit_w[16u + 4u * i + k] = f32(ubyte(c.y, k)) * d + m;
        }
    }
}

// Weights 16h .. 16h + 15 of the block (h = 0: low codes, 1: high), as 4 vec4s: the tiled
// matmul's share of a unit (two invocations decode one row's block).
fn decode_half(blk: u32, unit: u32, h: u32) -> array<vec4<f32>, 4> {
    let d = load_f16(blk);
    let m = load_f16(blk + 2u);
    let qh = load_u32(blk + 4u);
    // One expression a quad, not a loop over an array: an array indexed in a loop may live in
    // local memory (docs/PERF.md, D-named-registers).
    return array<vec4<f32>, 4>(
        q5_1_quad(q5_codes(load_u32(blk + 8u), qh, 0u), h, d, m),
        q5_1_quad(q5_codes(load_u32(blk + 12u), qh, 1u), h, d, m),
        q5_1_quad(q5_codes(load_u32(blk + 16u), qh, 2u), h, d, m),
        q5_1_quad(q5_codes(load_u32(blk + 20u), qh, 3u), h, d, m),
    );
}

fn q5_1_quad(c: vec2<u32>, h: u32, d: f32, m: f32) -> vec4<f32> {
    return vec4<f32>(unpack4xU8(select(c.x, c.y, h == 1u))) * d + m;
}
