// Q6_K: GGUF's 210-byte super-block of 256 weights (ql[128] low 4 bits, qh[64] high 2 bits,
// int8 scales[16] one per 16 weights, f16 d) stored in three planes: plane 0 ql then qh (192
// bytes, 12 vec4s per block), plane 1 the 16 scales (one vec4), plane 2 d. Weights come in two
// halves of 128; in half n, quarter k (32 weights, our unit u = 4n + k) weight l takes
// ql[64n + 32(k%2) + l] >> 4(k/2), qh[32n + l] >> 2k and scale[8n + 2k + l/16].
// w = d * scale * (q - 32).
const BLOCK_BYTES: u32 = 210u;
const BLOCK_UNITS: u32 = 8u;

// int8 scale `s` (0..15) of a block's scale vec4.
fn q6_k_scale(sc: vec4<u32>, s: u32) -> f32 {
    return q6_k_scale_of(sc[s >> 2u], s);
}

// int8 scale `s` (0..15) from its word (word s / 4 of the block's scale vec4).
fn q6_k_scale_of(word: u32, s: u32) -> f32 {
    return f32(sbyte(word, s & 3u));
}

// A matvec lane's scales, of quarters j and j + 2 of half n at positions 16h .. 16h + 15 of
// block bi (scale indices 8n + 2j + h and 8n + 2j + 4 + h: byte
// b = 2j + h of words 2n and 2n + 1 of the block's scale vec4). Shared by the f32 and the
// int8-input dot files (matvec/dot_q6_k.wgsl, dot8_q6_k.wgsl).
fn q6_k_scale_pair(bi: u32, n: u32, b: u32) -> vec2<f32> {
    let s = 4u * plane_start(1u) + 4u * bi + 2u * n;
    return vec2<f32>(f32(sbyte(wd(s), b)), f32(sbyte(wd(s + 1u), b)));
}

fn decode_unit(blk: u32, unit: u32) {
    let bi = blk / BLOCK_BYTES;
    let n = unit >> 2u;
    let k = unit & 3u;
    let d = plane_f16(2u, bi);
    let sc = w[plane_start(1u) + bi];
    let d0 = d * q6_k_scale(sc, 8u * n + 2u * k);
    let d1 = d * q6_k_scale(sc, 8u * n + 2u * k + 1u);
    // Words of plane 0: ql starts at word 0 of the block, qh at word 32.
    let base = 4u * (1u + 12u * bi);
    let ql = base + 16u * n + 8u * (k & 1u);
    let qh = base + 32u + 8u * n;
    for (var i = 0u; i < 8u; i++) {
        let lo = (wd(ql + i) >> (4u * (k >> 1u))) & 0x0f0f0f0fu;
        let hi = ((wd(qh + i) >> (2u * k)) & 0x03030303u) << 4u;
        let v = select(d1, d0, i < 4u) * (vec4<f32>(unpack4xU8(lo | hi)) - 32.0);
        for (var b = 0u; b < 4u; b++) {
            unit_w[4u * i + b] = v[b];
        }
    }
}

// A half unit (`decode_half`, formats/decode_half.wgsl): weights 16h .. 16h + 15 of unit `unit`
// (h = 0, 1: one scale), as 4 vec4s: the tiled matmul's share of a unit (two invocations decode
// one row's unit). ql and qh are one vec4 load each (plane 0 holds 12 vec4s per block: ql in
// 0..7, qh in 8..11).
//
// The loaded words of a half: its ql and qh vec4s, the word of plane 1 holding its scale, the
// word of plane 2 holding d, and the block index (which half of that word).
struct RawHalf {
    ql: vec4<u32>,
    qh: vec4<u32>,
    sc: u32,
    dw: u32,
    bi: u32,
}

// Scale 8n + 2k + h of the block (n = unit / 4, k = unit % 4): the half's one scale.
fn q6_k_half_scale(unit: u32, h: u32) -> u32 {
    return 8u * (unit >> 2u) + 2u * (unit & 3u) + h;
}

fn load_half_raw(blk: u32, unit: u32, h: u32) -> RawHalf {
    let bi = blk / BLOCK_BYTES;
    let n = unit >> 2u;
    let k = unit & 3u;
    let base = 1u + 12u * bi;
    let sc = wd(4u * (plane_start(1u) + bi) + (q6_k_half_scale(unit, h) >> 2u));
    return RawHalf(
        w[base + 4u * n + 2u * (k & 1u) + h],
        w[base + 8u + 2u * n + h],
        sc,
        plane_f16_word(2u, bi),
        bi,
    );
}

fn decode_raw(r: RawHalf, unit: u32, h: u32) -> array<vec4<f32>, 4> {
    let k = unit & 3u;
    let dl = f16_of(r.dw, 2u * r.bi) * q6_k_scale_of(r.sc, q6_k_half_scale(unit, h));
    let lo = (r.ql >> vec4<u32>(4u * (k >> 1u))) & vec4<u32>(0x0f0f0f0fu);
    let hi = ((r.qh >> vec4<u32>(2u * k)) & vec4<u32>(0x03030303u)) << vec4<u32>(4u);
    let c = lo | hi;
    // One expression a quad, not a loop over an array: an array indexed in a loop may live in
    // local memory (docs/PERF.md, D-named-registers).
    return array<vec4<f32>, 4>(
        dl * (vec4<f32>(unpack4xU8(c.x)) - 32.0),
        dl * (vec4<f32>(unpack4xU8(c.y)) - 32.0),
        dl * (vec4<f32>(unpack4xU8(c.z)) - 32.0),
        dl * (vec4<f32>(unpack4xU8(c.w)) - 32.0),
    );
}
