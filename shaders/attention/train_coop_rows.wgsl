// The tensor-core training attention programs' reads of the f32 activations (each binds q, k
// and v at 1, 2 and 3): the four values d .. d + 3 of a row at `base` (offsets need not be
// multiples of 4: four scalar loads). One function per binding: WGSL cannot pass a storage
// array.

fn q4(base: u32) -> vec4<f32> {
    return vec4<f32>(q[base], q[base + 1u], q[base + 2u], q[base + 3u]);
}

fn k4(base: u32) -> vec4<f32> {
    return vec4<f32>(k[base], k[base + 1u], k[base + 2u], k[base + 3u]);
}

fn v4(base: u32) -> vec4<f32> {
    return vec4<f32>(v[base], v[base + 1u], v[base + 2u], v[base + 3u]);
}
