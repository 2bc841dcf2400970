// The 64-row forward tile on the tensor cores that the prompt attention
// (attention/attention_coop.wgsl) and the training forward (attention/train_forward_coop.wgsl)
// share: a workgroup of 256 invocations = 8 subgroups of 32 holds TR = 64 query rows (the
// prompt's rows of one kv head, the training's (row, head) pairs) as four 16-row tiles, walks
// the keys in blocks of BK = 32 staged as f16 in `tile`, and scores each 16 x 16 (row tile,
// key tile) over the full head dim into `scores` (`score_tile`); each kernel's load_block
// fills `staged` (attention/coop_stage.wgsl) with an invocation's share of the next rows.

// Must be 256 (8 subgroups of 32: `Caps::coop_f16` holds only where the subgroup is 32 wide).
override WG: u32 = 256u;
// Head dimension (dk = dv): 64, 128 or 256.
override HD: u32 = 128u;
// Rows a workgroup (four row tiles).
const TR: u32 = 64u;
// Keys a block (two key tiles).
const BK: u32 = 32u;
// Row stride of `tile` holding a block's keys, in vec4<f16> (HD values + 8 of padding): every
// row starts 16-byte aligned, as a coop load needs, and consecutive rows start in different
// banks.
override RS: u32 = HD / 4u + 2u;
// Row stride of `tile` holding half of the dims of the 64 rows' q (no padding: 64 padded rows
// would not fit, and q is loaded once).
override QS: u32 = HD / 8u;
// Column stride of `scores` (a column: the block's rows).
const SC: u32 = TR;
// Row stride of `wt` in vec4<f16> (32 weights + 8 of padding).
const RW: u32 = 10u;

// A block's keys (K, then V), 32 rows of HD; or half of the rows' q, 64 rows of HD / 2.
var<workgroup> tile: array<vec4<f16>, 2112>; // 32 * RS at HD 256
// The block's scores, 64 rows x 32 keys, column-major (row r, key c at 64 c + r): the plain
// code's reads are consecutive. Also pass 1's partial maxima and sums, and the accumulators on
// their way out (eight 16 x 16 tiles).
var<workgroup> scores: array<f32, 2048>;
// The block's P, 64 rows x 32 keys as f16.
var<workgroup> wt: array<vec4<f16>, 640>;
// The 16 x 16 score tile (before the scale) of row tile `rt` and the block's key tile `kt`:
// the held q (`a0..a7` dims 0 .. HD / 2, `b0..b7` the rest; HD / 32 of each used) times the
// key tile's rows of `tile` as B, into `scores`.
fn score_tile(
    a0: MatA, a1: MatA, a2: MatA, a3: MatA, a4: MatA, a5: MatA, a6: MatA, a7: MatA,
    b0: MatA, b1: MatA, b2: MatA, b3: MatA, b4: MatA, b5: MatA, b6: MatA, b7: MatA,
    rt: u32, kt: u32,
) {
    let at = 16u * kt * RS;
    let h = HD / 8u;
    var s = MatC();
    s = mma(a0, load_bt(at), s);
    s = mma(a1, load_bt(at + 4u), s);
    if HD >= 128u {
        s = mma(a2, load_bt(at + 8u), s);
        s = mma(a3, load_bt(at + 12u), s);
    }
    if HD >= 256u {
        s = mma(a4, load_bt(at + 16u), s);
        s = mma(a5, load_bt(at + 20u), s);
        s = mma(a6, load_bt(at + 24u), s);
        s = mma(a7, load_bt(at + 28u), s);
    }
    s = mma(b0, load_bt(at + h), s);
    s = mma(b1, load_bt(at + h + 4u), s);
    if HD >= 128u {
        s = mma(b2, load_bt(at + h + 8u), s);
        s = mma(b3, load_bt(at + h + 12u), s);
    }
    if HD >= 256u {
        s = mma(b4, load_bt(at + h + 16u), s);
        s = mma(b5, load_bt(at + h + 20u), s);
        s = mma(b6, load_bt(at + h + 24u), s);
        s = mma(b7, load_bt(at + h + 28u), s);
    }
    store_scores(s, TR * 16u * kt + 16u * rt);
}
