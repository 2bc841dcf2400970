// The tiles of the training attention's three programs (with attention/train_params.wgsl):
// a workgroup of 256 invocations multiplies a tile of BQ (query row, head) pairs by a tile of
// BK keys, as flash attention does, so that each key row read from memory serves BQ pairs and
// each pair row BK keys (one workgroup per row re-reads every key row for every query).
//
// Pairs: under GQA the query heads of kv head g's group share its keys, so a tile's rows are
// the pairs e = row * group + head-in-group of one kv head, `group` heads of `BQ / group` rows
// side by side (pair_row gives the pair's row of q, o, do and lse).
//
// Scores: invocation tid owns entries (tid / 8, tid % 8 + 8 u), u < 4, of a BQ x BK tile.
// A product of rows over the head dims goes DC dims at a time: invocations 0..127 stage A
// (the pairs' q or do rows), 128..255 B (the keys' k or v rows), one vec4 of 4 dims each;
// then each invocation multiplies its A row by its four B rows. The staged rows are DC4
// vec4s apart (one of padding): the eight B rows a subgroup reads at once fall on distinct
// banks, and the four A rows are each read by eight lanes at once (a broadcast).
//
// Columns: the accumulations over the tile (o += p v, dq += ds k, dk += ds q, dv += p do) give
// invocation tid the tile rows 4 (tid / 32) .. + 3 and the columns lane + 32 u, u < 8, of the
// COLS columns of its workgroup (grid z walks heads wider than COLS, the scores recomputed per
// z): a subgroup's lanes read 32 consecutive floats of a row from memory, and the tile
// entries they need are one address (a broadcast).

// The mappings above assume 256 invocations (the ops set WG to 256).
override WG: u32 = 256u;
const BQ: u32 = 32u;
const BK: u32 = 32u;
const DC: u32 = 16u;
const DC4: u32 = 5u;
const COLS: u32 = 256u;
// Row stride of the BQ x BK tiles in workgroup memory (one of padding).
const RP: u32 = 33u;

var<workgroup> a_tile: array<vec4<f32>, 160>; // BQ * DC4
var<workgroup> b_tile: array<vec4<f32>, 160>; // BK * DC4

// Where grid z puts a workgroup: its first output column (COLS of them) and its split of the
// tile's sum.
struct ZSlice {
    col0: u32,
    split: u32,
}

fn z_slice(z: u32) -> ZSlice {
    let chunks = (max(p.dk, p.dv) + COLS - 1u) / COLS;
    return ZSlice((z % chunks) * COLS, z / chunks);
}

// Elements d .. d + 3 of the `row_len`-long row at `base`, zero past the row: four clamped
// loads and a mask (no vector indexed by a loop variable: the driver would keep it in memory).
fn row_mask(d: u32, row_len: u32) -> vec4<bool> {
    return vec4<u32>(d, d + 1u, d + 2u, d + 3u) < vec4<u32>(row_len);
}

fn q_vec4(base: u32, d: u32, row_len: u32) -> vec4<f32> {
    let l = row_len - 1u;
    let x = vec4<f32>(
        q[base + min(d, l)],
        q[base + min(d + 1u, l)],
        q[base + min(d + 2u, l)],
        q[base + min(d + 3u, l)],
    );
    return select(vec4<f32>(0.0), x, row_mask(d, row_len));
}

fn k_vec4(base: u32, d: u32, row_len: u32) -> vec4<f32> {
    let l = row_len - 1u;
    let x = vec4<f32>(
        k[base + min(d, l)],
        k[base + min(d + 1u, l)],
        k[base + min(d + 2u, l)],
        k[base + min(d + 3u, l)],
    );
    return select(vec4<f32>(0.0), x, row_mask(d, row_len));
}

// Which of an invocation's four tile entries (keys j, j + 8, j + 16, j + 24) pair `s` sees.
fn sees4(s: Sight, j: u32) -> vec4<bool> {
    let js = vec4<u32>(j, j + 8u, j + 16u, j + 24u);
    return vec4<bool>(s.valid) & (js >= vec4<u32>(s.first)) & (js <= vec4<u32>(s.i));
}

// Stages dims d0 .. d0 + DC of the q rows of pairs e0.. (A) and the k rows of keys j0.. (B)
// of kv head g; zeros past the block.
fn stage_qk(g: u32, e0: u32, j0: u32, d0: u32, tid: u32) {
    let r = (tid % 128u) / 4u;
    let x = tid % 4u;
    let d = d0 + 4u * x;
    if tid < 128u {
        var a = vec4<f32>(0.0);
        if e0 + r < pair_count() {
            a = q_vec4(p.q_offset + pair_row(g, e0 + r) * p.dk, d, p.dk);
        }
        a_tile[r * DC4 + x] = a;
    } else {
        var b = vec4<f32>(0.0);
        if j0 + r < p.n {
            b = k_vec4(p.k_offset + ((j0 + r) * p.n_kv + g) * p.dk, d, p.dk);
        }
        b_tile[r * DC4 + x] = b;
    }
}

// Adds the staged chunk's products to this invocation's four tile entries.
fn chunk_dots(acc: vec4<f32>, tid: u32) -> vec4<f32> {
    let ra = (tid / 8u) * DC4;
    let rb = (tid % 8u) * DC4;
    var s = acc;
    for (var x = 0u; x < DC / 4u; x++) {
        let a = a_tile[ra + x];
        s.x += dot(a, b_tile[rb + x]);
        s.y += dot(a, b_tile[rb + 8u * DC4 + x]);
        s.z += dot(a, b_tile[rb + 16u * DC4 + x]);
        s.w += dot(a, b_tile[rb + 24u * DC4 + x]);
    }
    return s;
}

// This invocation's four entries of q . k over the tile (pairs e0.., keys j0.. of kv head
// g), unscaled. Holds barriers: call in uniform control flow.
fn qk_dots(g: u32, e0: u32, j0: u32, tid: u32) -> vec4<f32> {
    var s = vec4<f32>(0.0);
    for (var d0 = 0u; d0 < p.dk; d0 += DC) {
        stage_qk(g, e0, j0, d0, tid);
        workgroupBarrier();
        s = chunk_dots(s, tid);
        workgroupBarrier();
    }
    return s;
}
