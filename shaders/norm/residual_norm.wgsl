// Residual add with its norms, one workgroup of WG per row (decode: 1 row; prefill: n):
//   a' = a / rms(a) * w_in       when PRE == 1 (Gemma's post-attention / post-FFW norm),
//   a' = a                       when PRE == 0 (Llama, Qwen);
//   h += a'                      in place: h is the residual stream;
//   y  = h / rms(h) * w_out      entry `main_out` only (the next norm: ffn_norm, the next
//                                layer's attn_norm or the output norm); `main` stops at h;
// with rms(x) = sqrt(mean(x^2) + eps), as norm/rms_norm.wgsl. Row r of each tensor starts at
// its offset + r * n. a, h and y are distinct buffers (wgpu forbids read + read-write of one).
// After y, `main_out` calls `store_q8(t, tid, y)` from the included file: norm/q8_none.wgsl
// (nothing) or norm/q8_out.wgsl (y's q8 copy as well, the decode matvec's q8 input, so no
// quantize dispatch is needed for it).
//
// A decode step runs this kernel twice a layer on one row, so its latency is what counts:
// every load an invocation makes must be in flight at once. Invocation tid holds the
// elements (4g + c) * WG + tid of a tile (group g < GROUPS, part c < 4) in registers, as the
// four fields of a `Tile` (one vec4 per group); the code is straight-line over the groups, so
// nothing is indexed at run time and the driver issues every load of a tile together (a loop
// over private-array slots bounded at run time kept one load in flight: docs/PERF.md,
// D-norm-straight-line). GROUPS = ceil(n / (4 WG)), at most 4, is set per width by the Rust side,
// so a 640-wide row loads one group. A row of n <= 4 * 4 * WG (4096 at WG 256: every model
// here) is one tile and stays in registers from the load to the last store: a and h are read
// once, h written once, y written once. Longer rows loop over tiles and read a (PRE) and h
// again in the later passes (each invocation re-reads the elements it wrote itself, so no
// barrier is needed). The workgroup sums are `workgroup_sum` from norm/reduce.wgsl.

struct Params {
    n: u32,
    n_rows: u32,
    a_offset: u32,
    h_offset: u32,
    y_offset: u32,
    eps: f32,
    // Word index of y's q8 copy (norm/q8_out.wgsl only; 0 otherwise).
    q_offset: u32,
    _pad: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> a: array<f32>;
@group(0) @binding(2) var<storage, read_write> h: array<f32>;
@group(0) @binding(3) var<storage, read> w_in: array<f32>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;
@group(0) @binding(5) var<storage, read> w_out: array<f32>;

override WG: u32 = 256u;
override PRE: u32 = 1u;
// Groups of 4 * WG elements per tile (1 to 4).
override GROUPS: u32 = 4u;

// One invocation's elements of a tile: group g's parts c in field g, component c. Groups at
// or past GROUPS stay zero.
struct Tile {
    g0: vec4<f32>,
    g1: vec4<f32>,
    g2: vec4<f32>,
    g3: vec4<f32>,
}

// The row-relative indices of a Tile's elements (same fields).
struct Index {
    g0: vec4<u32>,
    g1: vec4<u32>,
    g2: vec4<u32>,
    g3: vec4<u32>,
}

fn tile_len() -> u32 {
    return GROUPS * 4u * WG;
}

fn tiles() -> u32 {
    return (p.n + tile_len() - 1u) / tile_len();
}

// Row-relative index of group g's first element in tile t.
fn group_start(t: u32, g: u32) -> u32 {
    return t * tile_len() + 4u * g * WG;
}

// Invocation tid's indices in tile t: part c of group g at group_start(t, g) + c * WG + tid.
fn index(t: u32, tid: u32) -> Index {
    let parts = vec4<u32>(tid, WG + tid, 2u * WG + tid, 3u * WG + tid);
    return Index(
        group_start(t, 0u) + parts,
        group_start(t, 1u) + parts,
        group_start(t, 2u) + parts,
        group_start(t, 3u) + parts,
    );
}

// The row's elements of group g at indices i (0 past n, and for a group at or past GROUPS,
// which issues no load; indices clamped so loads stay in bounds). Called with constant g.
fn a_quad(base: u32, g: u32, i: vec4<u32>) -> vec4<f32> {
    if g >= GROUPS {
        return vec4<f32>(0.0);
    }
    let j = min(i, vec4<u32>(p.n - 1u));
    let v = vec4<f32>(a[base + j.x], a[base + j.y], a[base + j.z], a[base + j.w]);
    return select(vec4<f32>(0.0), v, i < vec4<u32>(p.n));
}

fn h_quad(base: u32, g: u32, i: vec4<u32>) -> vec4<f32> {
    if g >= GROUPS {
        return vec4<f32>(0.0);
    }
    let j = min(i, vec4<u32>(p.n - 1u));
    let v = vec4<f32>(h[base + j.x], h[base + j.y], h[base + j.z], h[base + j.w]);
    return select(vec4<f32>(0.0), v, i < vec4<u32>(p.n));
}

// The gains need no zeroing past n: the values they scale are zero there.
fn w_in_quad(g: u32, i: vec4<u32>) -> vec4<f32> {
    if g >= GROUPS {
        return vec4<f32>(0.0);
    }
    let j = min(i, vec4<u32>(p.n - 1u));
    return vec4<f32>(w_in[j.x], w_in[j.y], w_in[j.z], w_in[j.w]);
}

fn w_out_quad(g: u32, i: vec4<u32>) -> vec4<f32> {
    if g >= GROUPS {
        return vec4<f32>(0.0);
    }
    let j = min(i, vec4<u32>(p.n - 1u));
    return vec4<f32>(w_out[j.x], w_out[j.y], w_out[j.z], w_out[j.w]);
}

// Stores group g's elements below n (nothing for a group at or past GROUPS).
fn store_h_quad(base: u32, g: u32, i: vec4<u32>, v: vec4<f32>) {
    if g >= GROUPS {
        return;
    }
    if i.x < p.n { h[base + i.x] = v.x; }
    if i.y < p.n { h[base + i.y] = v.y; }
    if i.z < p.n { h[base + i.z] = v.z; }
    if i.w < p.n { h[base + i.w] = v.w; }
}

fn store_y_quad(base: u32, g: u32, i: vec4<u32>, v: vec4<f32>) {
    if g >= GROUPS {
        return;
    }
    if i.x < p.n { y[base + i.x] = v.x; }
    if i.y < p.n { y[base + i.y] = v.y; }
    if i.z < p.n { y[base + i.z] = v.z; }
    if i.w < p.n { y[base + i.w] = v.w; }
}

// Tile t of a's row, h's row, w_in, w_out.
fn load_a(row: u32, t: u32, tid: u32) -> Tile {
    let b = p.a_offset + row * p.n;
    let i = index(t, tid);
    return Tile(a_quad(b, 0u, i.g0), a_quad(b, 1u, i.g1), a_quad(b, 2u, i.g2), a_quad(b, 3u, i.g3));
}

fn load_h(row: u32, t: u32, tid: u32) -> Tile {
    let b = p.h_offset + row * p.n;
    let i = index(t, tid);
    return Tile(h_quad(b, 0u, i.g0), h_quad(b, 1u, i.g1), h_quad(b, 2u, i.g2), h_quad(b, 3u, i.g3));
}

fn w_in_tile(t: u32, tid: u32) -> Tile {
    let i = index(t, tid);
    return Tile(w_in_quad(0u, i.g0), w_in_quad(1u, i.g1), w_in_quad(2u, i.g2), w_in_quad(3u, i.g3));
}

fn w_out_tile(t: u32, tid: u32) -> Tile {
    let i = index(t, tid);
    return Tile(w_out_quad(0u, i.g0), w_out_quad(1u, i.g1), w_out_quad(2u, i.g2), w_out_quad(3u, i.g3));
}

fn store_h(row: u32, t: u32, tid: u32, v: Tile) {
    let b = p.h_offset + row * p.n;
    let i = index(t, tid);
    store_h_quad(b, 0u, i.g0, v.g0);
    store_h_quad(b, 1u, i.g1, v.g1);
    store_h_quad(b, 2u, i.g2, v.g2);
    store_h_quad(b, 3u, i.g3, v.g3);
}

fn store_y(row: u32, t: u32, tid: u32, v: Tile) {
    let b = p.y_offset + row * p.n;
    let i = index(t, tid);
    store_y_quad(b, 0u, i.g0, v.g0);
    store_y_quad(b, 1u, i.g1, v.g1);
    store_y_quad(b, 2u, i.g2, v.g2);
    store_y_quad(b, 3u, i.g3, v.g3);
}

// v * s * w, element by element.
fn scaled(v: Tile, s: f32, w: Tile) -> Tile {
    return Tile(v.g0 * s * w.g0, v.g1 * s * w.g1, v.g2 * s * w.g2, v.g3 * s * w.g3);
}

fn sum_sq(v: Tile) -> f32 {
    return dot(v.g0, v.g0) + dot(v.g1, v.g1) + dot(v.g2, v.g2) + dot(v.g3, v.g3);
}

fn add(x: Tile, d: Tile) -> Tile {
    return Tile(x.g0 + d.g0, x.g1 + d.g1, x.g2 + d.g2, x.g3 + d.g3);
}

fn inv_rms(ss: f32) -> f32 {
    return 1.0 / sqrt(ss / f32(p.n) + p.eps);
}

// The new h after h += a' over row `row`, and this invocation's share of its sum of squares;
// `last` is the row's last tile of the new h.
struct Residual {
    last: Tile,
    ss: f32,
}

// The first tile of a row's inputs, loaded together before any reduction waits on a: each
// barrier before a load that could have been issued earlier costs a round trip to memory.
// (With h and w_in loaded after a's reduction and w_out after h's, gemma3-4b's decode, 68 of
// these ops a step at 2560 wide, ran at 249.5 t/s against 263.1: docs/PERF.md, D-loads-first.)
struct Inputs {
    a: Tile,
    h: Tile,
    w_in: Tile,
}

fn first_inputs(row: u32, tid: u32) -> Inputs {
    var w = Tile(vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0));
    if PRE == 1u {
        w = w_in_tile(0u, tid);
    }
    return Inputs(load_a(row, 0u, tid), load_h(row, 0u, tid), w);
}

fn residual(row: u32, tid: u32, first: Inputs) -> Residual {
    let nt = tiles();
    var av = first.a;
    var r_a = 1.0;
    if PRE == 1u {
        var ss = sum_sq(av);
        for (var t = 1u; t < nt; t++) {
            ss += sum_sq(load_a(row, t, tid));
        }
        r_a = inv_rms(workgroup_sum(ss, tid));
    }
    var ss = 0.0;
    var hv = first.h;
    var wi = first.w_in;
    for (var t = 0u; t < nt; t++) {
        if t > 0u {
            av = load_a(row, t, tid);
            hv = load_h(row, t, tid);
            if PRE == 1u {
                wi = w_in_tile(t, tid);
            }
        }
        var d = av;
        if PRE == 1u {
            d = scaled(av, r_a, wi);
        }
        hv = add(hv, d);
        store_h(row, t, tid, hv);
        ss += sum_sq(hv);
    }
    return Residual(hv, ss);
}

fn row_index(wid: vec3<u32>, nwg: vec3<u32>) -> u32 {
    return wid.y * nwg.x + wid.x;
}

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) tid: u32,
) {
    let row = row_index(wid, nwg);
    if row >= p.n_rows {
        return;
    }
    _ = residual(row, tid, first_inputs(row, tid));
}

@compute @workgroup_size(WG)
fn main_out(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) tid: u32,
) {
    let row = row_index(wid, nwg);
    if row >= p.n_rows {
        return;
    }
    let first = first_inputs(row, tid);
    let w0 = w_out_tile(0u, tid);
    let res = residual(row, tid, first);
    let r = inv_rms(workgroup_sum(res.ss, tid));
    let nt = tiles();
    for (var t = 0u; t < nt; t++) {
        var hv = res.last;
        var wo = w0;
        if nt > 1u {
            hv = load_h(row, t, tid);
            wo = w_out_tile(t, tid);
        }
        let yv = scaled(hv, r, wo);
        store_y(row, t, tid, yv);
        store_q8(t, tid, yv);
    }
}
