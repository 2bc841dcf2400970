// Input of matvec/quantize_q8.wgsl: a vector x at x_offset.
@group(0) @binding(2) var<storage, read> x: array<f32>;

// Input i of the vector.
fn x_in(i: u32) -> f32 {
    return x[p.x_offset + i];
}
