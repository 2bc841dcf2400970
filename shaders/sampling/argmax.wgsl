// Greedy sampling: out[out_index] = the index of the largest x[x_offset + i], i < n; ties go
// to the lowest index, NaNs are ignored (all NaN gives 0xffffffff). One workgroup.

struct Params {
    n: u32,
    x_offset: u32,
    out_index: u32,
    _pad0: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<u32>;

override WG: u32 = 256u;
const NONE: u32 = 0xffffffffu;
var<workgroup> best_v: array<f32, 256>;
var<workgroup> best_i: array<u32, 256>;

// Whether (v, i) beats (bv, bi): larger value, or equal value at a lower index.
fn better(v: f32, i: u32, bv: f32, bi: u32) -> bool {
    return i != NONE && (bi == NONE || v > bv || (v == bv && i < bi));
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) tid: u32) {
    var bv = 0.0;
    var bi = NONE;
    for (var i = tid; i < p.n; i += WG) {
        let v = x[p.x_offset + i];
        // `v == v` is false only for NaN.
        if v == v && (bi == NONE || v > bv) {
            bv = v;
            bi = i;
        }
    }
    best_v[tid] = bv;
    best_i[tid] = bi;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        if tid < s && better(best_v[tid + s], best_i[tid + s], best_v[tid], best_i[tid]) {
            best_v[tid] = best_v[tid + s];
            best_i[tid] = best_i[tid + s];
        }
        workgroupBarrier();
    }
    if tid == 0u {
        out[p.out_index] = best_i[0];
    }
}
