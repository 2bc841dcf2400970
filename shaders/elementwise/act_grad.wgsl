// The derivatives of elementwise/act.wgsl's activations (which this file needs: ACT and the
// GELU constants), for the GLU's backward. Each is the analytic derivative of the formula
// act.wgsl evaluates, not of the exact erf GELU, so gradients match the forward the model ran.

// d/dx of 0.5 x (1 + tanh(c x (1 + a x^2))):
// 0.5 (1 + t) + 0.5 x (1 - t^2) c (1 + 3 a x^2), t the tanh.
fn gelu_tanh_grad(x: f32) -> f32 {
    let t = tanh(SQRT_2_OVER_PI * x * (1.0 + GELU_COEF_A * x * x));
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * SQRT_2_OVER_PI * (1.0 + 3.0 * GELU_COEF_A * x * x);
}

// d/dx of x s(x), s the logistic sigmoid: s (1 + x (1 - s)).
fn silu_grad(x: f32) -> f32 {
    let s = 1.0 / (1.0 + exp(-x));
    return s * (1.0 + x * (1.0 - s));
}

fn act_grad(x: f32) -> f32 {
    if ACT == 0u {
        return gelu_tanh_grad(x);
    }
    return silu_grad(x);
}
