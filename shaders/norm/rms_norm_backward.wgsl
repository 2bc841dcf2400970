// Backward of the RMS norm over rows (norm/rms_norm.wgsl): y = x r g with r = 1 / sqrt(mean(x^2)
// + eps) and g the gain (`gain(i)`: norm/gain_weighted.wgsl, or norm/gain_none.wgsl where the
// forward has none). Given dy, per row
//   dx_i = r dy_i g_i - x_i r^3 (sum_j dy_j g_j x_j) / n,
// which is r (dxhat - xhat mean(dxhat xhat)) with xhat = x r, dxhat = dy g (eps included: it
// enters only through r). Row r reads x and dy at x_offset / dy_offset + r n and writes dx at
// dx_offset + r n. One workgroup of 256 per row: one pass for both sums (x^2 and dy g x, two
// workgroup sums from norm/reduce.wgsl), one for the output. Training runs it once a norm a
// step, not once a token, so it keeps the plain one-load-a-trip loops.

struct Params {
    n: u32,
    n_rows: u32,
    x_offset: u32,
    dy_offset: u32,
    dx_offset: u32,
    eps: f32,
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> dy: array<f32>;
@group(0) @binding(3) var<storage, read_write> dx: array<f32>;

override WG: u32 = 256u;

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) tid: u32,
) {
    let row = wid.y * nwg.x + wid.x;
    if row >= p.n_rows {
        return;
    }
    let xb = p.x_offset + row * p.n;
    let db = p.dy_offset + row * p.n;
    var ss = 0.0;
    var dot = 0.0;
    for (var i = tid; i < p.n; i += WG) {
        let v = x[xb + i];
        ss += v * v;
        dot += dy[db + i] * gain(i) * v;
    }
    ss = workgroup_sum(ss, tid);
    dot = workgroup_sum(dot, tid);
    let r = 1.0 / sqrt(ss / f32(p.n) + p.eps);
    // r^3 dot / n: the coefficient of x_i in every dx_i of the row.
    let k = r * r * r * dot / f32(p.n);
    let ob = p.dx_offset + row * p.n;
    for (var i = tid; i < p.n; i += WG) {
        dx[ob + i] = r * dy[db + i] * gain(i) - x[xb + i] * k;
    }
}
