// The weight gradients' parameters and bindings (matmul/weight_grad.wgsl, the 64 x 64 tiles
// of any dW, and matmul/weight_grad_thin.wgsl, a dW one of whose sides is a LoRA rank):
// ops/matmul_weight_grad.rs.

struct Params {
    n_tokens: u32,
    n_in: u32,
    n_out: u32,
    dy_offset: u32,
    dy_stride: u32,
    x_offset: u32,
    x_stride: u32,
    dw_offset: u32,
    accumulate: u32,
    tokens_per_split: u32,
    split_stride: u32,
    _pad0: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> dy: array<f32>;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read_write> dw: array<f32>;
