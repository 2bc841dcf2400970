// One AdamW step over n parameters, in torch.optim.AdamW's order (torch's single-tensor
// path), with the global-norm clip of torch.nn.utils.clip_grad_norm_ folded in:
//   clip = min(1, max_norm / (sqrt(norm_sq) + 1e-6)) where max_norm > 0, else 1
//   g    = grad clip
//   w    = w (1 - lr wd)                        param.mul_(1 - lr * weight_decay)
//   m    = m + (1 - b1) (g - m)                 exp_avg.lerp_(grad, 1 - beta1)
//   v    = v b2 + (1 - b2) g g                  exp_avg_sq.mul_(beta2).addcmul_(grad, grad, 1 - beta2)
//   w    = w - (lr / bc1) (m / (sqrt(v) / sqrt(bc2) + eps))
//                                               param.addcdiv_(exp_avg, denom, value=-step_size)
// with bc1 = 1 - b1^t, bc2 = 1 - b2^t. The host computes every per-step factor in f64 and
// rounds it once (decay, step_size, bc2_sqrt), as torch computes them in Python floats.
// norm_sq is read from a buffer (norm_sq.wgsl's total), so clipping costs no read-back.
// A squared norm that is NaN or infinite (a gradient that overflowed) skips the step: every
// invocation returns before writing, so w, m and v keep their bits, as torch's GradScaler
// skips optimizer.step() on an overflow; the host sees the same norm and keeps its step count.
// One invocation a parameter, WG a workgroup.

struct Params {
    n: u32,
    w_offset: u32,
    g_offset: u32,
    m_offset: u32,
    v_offset: u32,
    norm_offset: u32,
    max_norm: f32,
    decay: f32,
    one_minus_b1: f32,
    beta2: f32,
    one_minus_b2: f32,
    step_size: f32,
    bc2_sqrt: f32,
    eps: f32,
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> w: array<f32>;
@group(0) @binding(2) var<storage, read> grad: array<f32>;
@group(0) @binding(3) var<storage, read_write> m: array<f32>;
@group(0) @binding(4) var<storage, read_write> v: array<f32>;
@group(0) @binding(5) var<storage, read> norm_sq: array<f32>;

override WG: u32 = 256u;

// Whether x is neither NaN nor infinite, from its exponent bits (all ones for both): WGSL lets
// a compiler assume floats are finite, so a test like x != x may be folded away.
fn is_finite(x: f32) -> bool {
    return (bitcast<u32>(x) & 0x7f800000u) != 0x7f800000u;
}

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) tid: u32,
) {
    let i = (wid.y * nwg.x + wid.x) * WG + tid;
    if i >= p.n {
        return;
    }
    let norm2 = norm_sq[p.norm_offset];
    if !is_finite(norm2) {
        return;
    }
    var clip = 1.0;
    if p.max_norm > 0.0 {
        clip = min(1.0, p.max_norm / (sqrt(norm2) + 1e-6));
    }
    let g = grad[p.g_offset + i] * clip;
    let m0 = m[p.m_offset + i];
    let m1 = m0 + p.one_minus_b1 * (g - m0);
    let v1 = v[p.v_offset + i] * p.beta2 + p.one_minus_b2 * g * g;
    let denom = sqrt(v1) / p.bc2_sqrt + p.eps;
    let w1 = w[p.w_offset + i] * p.decay;
    w[p.w_offset + i] = w1 - p.step_size * (m1 / denom);
    m[p.m_offset + i] = m1;
    v[p.v_offset + i] = v1;
}
