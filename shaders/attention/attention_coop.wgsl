// Prompt-block attention on the tensor cores: the contract of attention.wgsl for one split
// (causal by position, GQA, sliding window, scale, soft-cap; out[out_offset + (t * n_heads +
// h) * HD + d]) over an f16 cache, with q rounded to f16 and the products on 16 x 16 x 16
// cooperative matrices (f16 operands, f32 sums). The types and ops (MatA, MatB, MatC,
// coop_lane, mma; load_q, load_p, load_kt, load_v, store_s, store_o) come from
// common/coop_ops.wgsl and attention/coop_io.wgsl, or in the tests' emulation from
// common/coop_emul.wgsl and attention/coop_io_emul.wgsl.
//
// Workgroup (tile, kv head) of 128 invocations = 4 subgroups of 32 takes 16 query rows of kv
// head kvh (row r = t * group + g is head kvh * group + g of token t, as in attention.wgsl)
// and walks the keys its rows need in blocks of BK = 64, subgroup s taking keys 16 s .. 16 s +
// 15 of a block. Two passes over the blocks, so that the output accumulators never need a
// per-row rescale (a cooperative matrix's elements cannot be addressed by row):
// 1. S = Q K^T for the block (HD / 16 multiply-adds per subgroup: q from workgroup memory,
//    K^T straight from the cache), scaled, soft-capped and masked by plain code through
//    workgroup memory; each of a row's 8 invocations keeps a running max and sum (online)
//    over its own 8 keys of every block, and at the end the 8 partials are combined through
//    workgroup memory into the row's max m and sum l (every invocation of the row combining
//    them in the same order, so they agree).
// 2. S again (the same products), P = exp(S - m) / l rounded to f16 into workgroup memory,
//    and O += P V, subgroup s owning dims s HD / 4 .. (s + 1) HD / 4 (HD / 64 accumulators
//    of 16 x 16), V straight from the cache.
// The cache is read as vec4<f16> (the f16 cache's words, two values each, low half first):
// a block of 16 keys of one kv head is 16 rows of HD values, 16-byte aligned for any key
// since HD >= 64, and the Rust side requires max_len to be a multiple of 16, so a block that
// starts below max_len lies inside the head; one past it (a subgroup's keys beyond the tile's
// last key) loads the head's last block instead, whose scores are all masked. Masked keys
// weigh exactly 0, and the cache holds finite values everywhere (zeros where never written),
// so they add nothing to O. Every coop op is reached in uniform control flow: the loops'
// bounds are workgroup-uniform loads and HD is an override.
// Precision: q and P rounded to f16 (one f16 ulp each), the cache's values exact, products
// exact in f32 and summed in f32 by the tensor cores; m, l, the scale and the soft-cap in f32
// plain arithmetic (docs/KERNELS.md has the bound).
// Params, the shared bindings and `row_keys`: attention/params.wgsl; the caches here, as
// vec4<f16>.

@group(0) @binding(2) var<storage, read> kc: array<vec4<f16>>;
@group(0) @binding(3) var<storage, read> vc: array<vec4<f16>>;

// Must be 128 (4 subgroups of 32).
override WG: u32 = 128u;
// Head dimension: 64, 128 or 256.
override HD: u32 = 128u;
// Query rows per workgroup (one coop tile) and keys per block (16 per subgroup).
const TR: u32 = 16u;
const BK: u32 = 64u;
// Row strides in vec4<f16> of the q tile (HD values + 8 of padding) and the P tile (BK + 8):
// every row starts 16-byte aligned, as a coop load needs, and rows start in different banks.
override RQ: u32 = HD / 4u + 2u;
const RP: u32 = BK / 4u + 2u;
// Score of a masked key (and the running max before any key); exp(NONE - m) is 0.
const NONE: f32 = -3.0e38;

var<workgroup> qs: array<vec4<f16>, 1056>; // TR * RQ at HD 256
var<workgroup> ps: array<vec4<f16>, 288>; // TR * RP
// The block's scores, column-major (key k of the block, row r at k * TR + r).
var<workgroup> ss: array<f32, 1024>; // BK * TR
// One 16 x 16 output tile per subgroup, column-major, for the final store.
var<workgroup> os: array<f32, 1024>;
// Each invocation's running max and sum at the end of pass 1 (invocation tid at tid).
var<workgroup> part_m: array<f32, 128>;
var<workgroup> part_l: array<f32, 128>;
// The tile's key range (x, y); a vec4 so that every workgroup variable is a multiple of 16
// bytes (a scalar among them may leave the coop tiles only 8-byte aligned).
var<workgroup> key_range: vec4<u32>;

// Score j (0 .. BK) of row r in the block at kb: the product scaled, soft-capped, masked
// outside the row's keys.
fn score(kb: u32, j: u32, r: u32, keys: vec2<u32>, valid: bool) -> f32 {
    let key = kb + j;
    var s = ss[j * TR + r] * p.scale;
    if p.softcap > 0.0 {
        s = p.softcap * tanh(s / p.softcap);
    }
    if !valid || key < keys.x || key >= keys.y {
        s = NONE;
    }
    return s;
}

// The block's S = Q K^T for subgroup sg's 16 keys into ss (then a barrier). `head` is the
// cache's vec4 index of the kv head's first value.
fn block_scores(kb: u32, sg: u32, head: u32) {
    let key0 = min(kb + 16u * sg, p.max_len - 16u);
    let k_at = head + key0 * (HD / 4u);
    var s = MatC();
    for (var c = 0u; c < HD / 16u; c++) {
        s = mma(load_q(4u * c), load_kt(k_at + 4u * c), s);
    }
    store_s(s, 16u * TR * sg);
    workgroupBarrier();
}

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) tid: u32,
) {
    // The last tiles first: their rows see the most keys (causal), so started last they would
    // run on alone at the end (docs/PERF.md, D-two-units-a-barrier).
    let tile = nwg.x - 1u - wid.x;
    let kvh = wid.y;
    let sg = tid / 32u;
    let lane = tid % 32u;
    coop_lane(lane);
    let n_rows = p.n_tokens * p.group;
    let row0 = tile * TR;

    // Stage q: invocation tid writes vec4s tid, tid + WG, .. of the 16 x HD tile (zeros for rows
    // past the block).
    for (var i = tid; i < TR * HD / 4u; i += WG) {
        let r = i / (HD / 4u);
        let d = 4u * (i % (HD / 4u));
        let row = row0 + r;
        var v = vec4<f32>(0.0);
        if row < n_rows {
            let t = row / p.group;
            let h = kvh * p.group + row % p.group;
            let b = p.q_offset + t * p.q_stride + h * HD + d;
            v = vec4<f32>(qv[b], qv[b + 1u], qv[b + 2u], qv[b + 3u]);
        }
        qs[r * RQ + d / 4u] = vec4<f16>(v);
    }
    // The keys any row of the tile needs, from a multiple of 16.
    if tid == 0u {
        var lo = 0xffffffffu;
        var hi = 0u;
        for (var r = row0; r < min(row0 + TR, n_rows); r++) {
            let b = row_keys(r);
            lo = min(lo, b.x);
            hi = max(hi, b.y);
        }
        key_range = vec4<u32>(lo & ~15u, hi, 0u, 0u);
    }
    let range = workgroupUniformLoad(&key_range);
    let lo = range.x;
    let hi = range.y;

    // Plain-code role: row r, keys 8 c .. 8 c + 7 of each block.
    let r = tid % TR;
    let c = tid / TR;
    let row = row0 + r;
    let valid = row < n_rows;
    let keys = row_keys(min(row, n_rows - 1u));
    let head = kvh * p.max_len * (HD / 4u);

    // Pass 1: each row's max and sum of exp(s - max) over its keys, each of the row's 8
    // invocations over its own 8 keys of every block (online), then the 8 partials combined.
    var m = NONE;
    var l = 0.0;
    for (var kb = lo; kb < hi; kb += BK) {
        block_scores(kb, sg, head);
        var sk: array<f32, 8>;
        var mb = m;
        for (var k = 0u; k < 8u; k++) {
            sk[k] = score(kb, 8u * c + k, r, keys, valid);
            mb = max(mb, sk[k]);
        }
        var lb = 0.0;
        for (var k = 0u; k < 8u; k++) {
            lb += select(exp(sk[k] - mb), 0.0, sk[k] <= NONE);
        }
        l = l * exp(m - mb) + lb;
        m = mb;
        // The next block's scores overwrite ss.
        workgroupBarrier();
    }
    part_m[tid] = m;
    part_l[tid] = l;
    workgroupBarrier();
    m = NONE;
    for (var k = 0u; k < 8u; k++) {
        m = max(m, part_m[r + TR * k]);
    }
    l = 0.0;
    for (var k = 0u; k < 8u; k++) {
        l += part_l[r + TR * k] * exp(part_m[r + TR * k] - m);
    }
    let inv_l = select(0.0, 1.0 / l, l > 0.0);

    // Pass 2: O = sum over the blocks of P V, P = exp(s - m) / l.
    let d0 = sg * (HD / 4u);
    var o0 = MatC();
    var o1 = MatC();
    var o2 = MatC();
    var o3 = MatC();
    for (var kb = lo; kb < hi; kb += BK) {
        block_scores(kb, sg, head);
        var pw: array<f32, 8>;
        for (var k = 0u; k < 8u; k++) {
            let s = score(kb, 8u * c + k, r, keys, valid);
            pw[k] = select(exp(s - m) * inv_l, 0.0, s <= NONE);
        }
        ps[r * RP + 2u * c] = vec4<f16>(vec4<f32>(pw[0], pw[1], pw[2], pw[3]));
        ps[r * RP + 2u * c + 1u] = vec4<f16>(vec4<f32>(pw[4], pw[5], pw[6], pw[7]));
        workgroupBarrier();
        for (var kc16 = 0u; kc16 < BK / 16u; kc16++) {
            let a = load_p(4u * kc16);
            let v_at = head + min(kb + 16u * kc16, p.max_len - 16u) * (HD / 4u) + d0 / 4u;
            o0 = mma(a, load_v(v_at), o0);
            if HD >= 128u {
                o1 = mma(a, load_v(v_at + 4u), o1);
            }
            if HD >= 256u {
                o2 = mma(a, load_v(v_at + 8u), o2);
                o3 = mma(a, load_v(v_at + 12u), o3);
            }
        }
        workgroupBarrier();
    }

    // Out: each accumulator through the subgroup's scratch tile, the rows inside the block.
    store_out(o0, sg, lane, row0, n_rows, kvh, d0);
    if HD >= 128u {
        store_out(o1, sg, lane, row0, n_rows, kvh, d0 + 16u);
    }
    if HD >= 256u {
        store_out(o2, sg, lane, row0, n_rows, kvh, d0 + 32u);
        store_out(o3, sg, lane, row0, n_rows, kvh, d0 + 48u);
    }
}

// Accumulator `o` (rows row0 .. row0 + 15, dims d .. d + 15) into out through subgroup sg's
// scratch tile. Called by every invocation in uniform control flow (it holds barriers).
fn store_out(o: MatC, sg: u32, lane: u32, row0: u32, n_rows: u32, kvh: u32, d: u32) {
    store_o(o, 256u * sg);
    workgroupBarrier();
    for (var e = 0u; e < 8u; e++) {
        let i = lane + 32u * e;
        let row = row0 + i % 16u;
        if row < n_rows {
            let t = row / p.group;
            let h = kvh * p.group + row % p.group;
            out[p.out_offset + (t * p.n_heads + h) * HD + d + i / 16u] = os[256u * sg + i];
        }
    }
    workgroupBarrier();
}
