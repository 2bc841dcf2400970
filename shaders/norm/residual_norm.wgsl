// Residual add with its norms, one workgroup of WG per row (decode: 1 row; prefill: n):
//   a' = a / rms(a) * w_in       when PRE == 1 (Gemma's post-attention / post-FFW norm),
//   a' = a                       when PRE == 0 (Llama, Qwen);
//   h += a'                      in place: h is the residual stream;
//   y  = h / rms(h) * w_out      entry `main_out` only (the next norm: ffn_norm, the next
//                                layer's attn_norm or the output norm); `main` stops at h;
// with rms(x) = sqrt(mean(x^2) + eps), as norm/rms_norm.wgsl. Row r of each tensor starts at
// its offset + r * n. a, h and y are distinct buffers (wgpu forbids read + read-write of one).
// After each tile of y, `main_out` calls `store_q8(t, tid)` (hv then holds the tile's y) from
// the included file: norm/q8_none.wgsl (nothing) or norm/q8_out.wgsl (y's q8 copy as well,
// the decode matvec's q8 input, so no quantize dispatch is needed for it).
//
// Invocation tid handles elements t * TILE + k * WG + tid (k < PER) of tile t, so each of
// its PER loads is independent and a warp's loads are consecutive. A row of n <= TILE
// (256 * 16 = 4096: every model here) is one tile and stays in registers (`av`, `hv`) from
// the load to the last store: a and h are read once, h written once, y written once. Longer
// rows loop over tiles and read a (PRE) and h again in the later passes (each invocation
// re-reads the elements it wrote itself, so no barrier is needed). The workgroup sums are
// `workgroup_sum` from norm/reduce.wgsl.

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
// Values per invocation per tile.
const PER: u32 = 16u;

var<private> av: array<f32, PER>;
var<private> hv: array<f32, PER>;

fn tiles() -> u32 {
    return (p.n + PER * WG - 1u) / (PER * WG);
}

// Slots of tile t that hold elements (the same for every invocation: loops bounded by it are
// uniform). A 640-wide row at WG 256 uses 3 of the 16: looping over all 16 issued 13 wasted
// clamped loads per tensor and made the fused kernel slower than the three it replaces.
fn used(t: u32) -> u32 {
    let rest = p.n - t * PER * WG;
    return min(PER, (rest + WG - 1u) / WG);
}

// Element k of invocation tid in tile t (row-relative).
fn elem(t: u32, tid: u32, k: u32) -> u32 {
    return t * PER * WG + k * WG + tid;
}

// av <- tile t of a's row (0 past n; the index is clamped so every load is in bounds).
fn load_a(row: u32, t: u32, tid: u32) {
    let base = p.a_offset + row * p.n;
    for (var k = 0u; k < used(t); k++) {
        let i = elem(t, tid, k);
        av[k] = select(0.0, a[base + min(i, p.n - 1u)], i < p.n);
    }
}

// hv <- tile t of h's row (0 past n).
fn load_h(row: u32, t: u32, tid: u32) {
    let base = p.h_offset + row * p.n;
    for (var k = 0u; k < used(t); k++) {
        let i = elem(t, tid, k);
        hv[k] = select(0.0, h[base + min(i, p.n - 1u)], i < p.n);
    }
}

fn sum_sq_a(t: u32) -> f32 {
    var acc = 0.0;
    for (var k = 0u; k < used(t); k++) {
        acc += av[k] * av[k];
    }
    return acc;
}

fn sum_sq_h(t: u32) -> f32 {
    var acc = 0.0;
    for (var k = 0u; k < used(t); k++) {
        acc += hv[k] * hv[k];
    }
    return acc;
}

fn inv_rms(ss: f32) -> f32 {
    return 1.0 / sqrt(ss / f32(p.n) + p.eps);
}

// h += a' over row `row`. Returns this invocation's share of the new row's sum of squares;
// hv holds the last tile of the new h.
fn residual(row: u32, tid: u32) -> f32 {
    let nt = tiles();
    var r_a = 1.0;
    if PRE == 1u {
        var ss = 0.0;
        for (var t = 0u; t < nt; t++) {
            load_a(row, t, tid);
            ss += sum_sq_a(t);
        }
        r_a = inv_rms(workgroup_sum(ss, tid));
    }
    let base = p.h_offset + row * p.n;
    var ss = 0.0;
    for (var t = 0u; t < nt; t++) {
        if PRE == 0u || nt > 1u {
            load_a(row, t, tid);
        }
        load_h(row, t, tid);
        for (var k = 0u; k < used(t); k++) {
            let i = elem(t, tid, k);
            var d = av[k];
            if PRE == 1u {
                d = d * r_a * w_in[min(i, p.n - 1u)];
            }
            hv[k] += d;
            if i < p.n {
                h[base + i] = hv[k];
            }
        }
        ss += sum_sq_h(t);
    }
    return ss;
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
    _ = residual(row, tid);
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
    let r = inv_rms(workgroup_sum(residual(row, tid), tid));
    let nt = tiles();
    let base = p.y_offset + row * p.n;
    for (var t = 0u; t < nt; t++) {
        if nt > 1u {
            load_h(row, t, tid);
        }
        // hv becomes the tile of y (0 past n), which store_q8 reads.
        for (var k = 0u; k < used(t); k++) {
            let i = elem(t, tid, k);
            hv[k] = hv[k] * r * w_out[min(i, p.n - 1u)];
            if i < p.n {
                y[base + i] = hv[k];
            }
        }
        store_q8(t, tid);
    }
}
