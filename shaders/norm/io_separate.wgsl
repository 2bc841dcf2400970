// RMS norm bindings, out of place: x read, y written (x and y are different buffers).

@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<storage, read> weight: array<f32>;

fn load_x(i: u32) -> f32 {
    return x[i];
}

// Element i of the output rows (relative to y_offset).
fn store_y(i: u32, v: f32) {
    y[p.y_offset + i] = v;
}
