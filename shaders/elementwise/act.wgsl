// The gate activations of gated linear units, picked by the ACT override (part of the
// pipeline key): 0 = GELU, tanh form as llama.cpp's ggml_gelu (GEGLU); 1 = SiLU (SwiGLU).
// One file for elementwise/glu.wgsl and matvec/x_glu.wgsl, so both compute the same values.

override ACT: u32 = 0u;

const SQRT_2_OVER_PI: f32 = 0.7978845608028654;
const GELU_COEF_A: f32 = 0.044715;

fn gelu_tanh(x: f32) -> f32 {
    return 0.5 * x * (1.0 + tanh(SQRT_2_OVER_PI * x * (1.0 + GELU_COEF_A * x * x)));
}

fn silu(x: f32) -> f32 {
    return x / (1.0 + exp(-x));
}

fn act(x: f32) -> f32 {
    if ACT == 0u {
        return gelu_tanh(x);
    }
    return silu(x);
}
