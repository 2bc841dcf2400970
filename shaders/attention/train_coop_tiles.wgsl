// What the training attention's tensor-core backward programs share
// (attention/train_backward_dq_coop.wgsl, attention/train_backward_dkdv_coop.wgsl, with
// attention/train_params.wgsl; the forward, attention/train_forward_coop.wgsl, tiles 64 pairs
// on its own): the f32 kernels' contract, the products on 16 x 16 x 16
// cooperative matrices (f16 operands, f32 sums; the types and ops from common/coop_ops.wgsl and
// attention/train_coop_io.wgsl, or in the tests' emulation common/coop_emul.wgsl and
// attention/train_coop_io_emul.wgsl).
//
// A workgroup of 128 invocations = 4 subgroups of 32 holds a fixed tile of TR = 16 rows (dq's:
// (row, head) pairs of one kv head; dk/dv's: key rows) and walks the rows
// it meets (keys, or pairs) through `tile`: 32 rows of HD values as f16, converted from the f32
// activations while staging. The fixed rows are staged through `tile` once and then held in
// registers as A operands (each subgroup the HD / 32 16-dim chunks of its half of the dims),
// so that the walked tiles have all of workgroup memory: at HD 256, `tile` is 16.5 KiB and the
// whole workgroup under 24 KiB (lavapipe, which runs the emulated body in the tests, allows 32).
// A 16 x 16 score tile's sum over the dims is split between two subgroups by halves of the
// dims: each stores its partial product in `parts` and the plain code adds the two, so that
// every subgroup does the same number of products with no branch on the subgroup (every coop
// op must be reached in uniform control flow: loop bounds come from workgroupUniformLoad, HD
// is an override).
//
// The scores, the softmax and ds are plain f32 code over `parts`, with the f32 kernels' rules
// (`first_key`, `score`, `sight` of attention/train_params.wgsl); the weights (P, or ds) are
// rounded to f16 into workgroup memory for the second products.

// Must be 128 (4 subgroups of 32: `Caps::coop_f16` holds only where the subgroup is 32 wide).
override WG: u32 = 128u;
// Head dimension (dk = dv): 64, 128 or 256.
override HD: u32 = 128u;
// Rows of the fixed tile (one coop tile).
const TR: u32 = 16u;
// Row stride of `tile` in vec4<f16> (HD values + 8 of padding): every row starts 16-byte
// aligned, as a coop load needs, and consecutive rows start in different banks.
override RS: u32 = HD / 4u + 2u;
var<workgroup> tile: array<vec4<f16>, 2112>; // 32 * RS at HD 256
// Four 16 x 16 f32 tiles, column-major (element (r, c) of tile t at 256 t + 16 c + r): the
// subgroups' partial products, and the output accumulators on their way out.
var<workgroup> parts: array<f32, 1024>;

// Rows `row0` .. of `tile` from `count` k rows (`from_v`: v rows) of kv head g from key j0
// (zeros past the block).
fn stage_keys(g: u32, j0: u32, row0: u32, count: u32, from_v: bool, tid: u32) {
    for (var i = tid; i < count * (HD / 4u); i += WG) {
        let r = i / (HD / 4u);
        let x = i % (HD / 4u);
        var a = vec4<f32>(0.0);
        if j0 + r < p.n {
            let at = ((j0 + r) * p.n_kv + g) * HD + 4u * x;
            if from_v {
                a = v4(p.v_offset + at);
            } else {
                a = k4(p.k_offset + at);
            }
        }
        tile[(row0 + r) * RS + x] = vec4<f16>(a);
    }
}

// Chunk c (dims dh * HD / 2 + 16 c ..) of the 16 rows of `tile` from row `row0`, as an A
// operand: what a subgroup holds of the fixed rows (dh: its half of the dims).
fn held(row0: u32, dh: u32, c: u32) -> MatA {
    return load_a_rows(row0 * RS + (dh * HD / 2u + 16u * c) / 4u);
}

// The partial product of the 16 x 16 score tile of subgroup sg: the held rows `a0..a7` (its
// half dh of the dims) times the 16 rows of `tile` from `row0` (as B = their transpose), into
// parts[256 sg ..]. HD / 32 multiply-adds (the unused operands are never read).
fn score_part(
    a0: MatA, a1: MatA, a2: MatA, a3: MatA, a4: MatA, a5: MatA, a6: MatA, a7: MatA,
    row0: u32, dh: u32, sg: u32,
) {
    let at = row0 * RS + dh * HD / 8u;
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
    store_part(s, 256u * sg);
}

// Entry (r, c) of the score tile whose halves are parts tiles t and t + 2.
fn part_sum(t: u32, r: u32, c: u32) -> f32 {
    let at = 256u * t + 16u * c + r;
    return parts[at] + parts[at + 512u];
}
