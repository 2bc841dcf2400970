// What the tensor-core backward passes of the training attention read
// (attention/train_backward_dq_coop.wgsl, attention/train_backward_dkdv_coop.wgsl): their
// inputs' bindings (each adds its outputs at binding 8 on), do's scale, and the reads of o and
// do rows (q, k, v: attention/train_coop_rows.wgsl).

@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> k: array<f32>;
@group(0) @binding(3) var<storage, read> v: array<f32>;
@group(0) @binding(4) var<storage, read> o: array<f32>;
@group(0) @binding(5) var<storage, read> lse: array<f32>;
@group(0) @binding(6) var<storage, read> dout: array<f32>;
@group(0) @binding(7) var<storage, read> start: array<u32>;

// do's (and so ds's and the accumulators') factor: attention/train_backward_dkdv_coop.wgsl's
// header says why.
const DO_SCALE: f32 = 256.0;

fn o4(base: u32) -> vec4<f32> {
    return vec4<f32>(o[base], o[base + 1u], o[base + 2u], o[base + 3u]);
}

fn do4(base: u32) -> vec4<f32> {
    return vec4<f32>(dout[base], dout[base + 1u], dout[base + 2u], dout[base + 3u]);
}
