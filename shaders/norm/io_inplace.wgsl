// RMS norm bindings, in place: one read-write buffer; the output overwrites x at x_offset
// (each workgroup reads its whole row for the sum before any invocation writes it).

@group(0) @binding(1) var<storage, read_write> x: array<f32>;
@group(0) @binding(2) var<storage, read> weight: array<f32>;

fn load_x(i: u32) -> f32 {
    return x[i];
}

// Element i of the output rows (relative to x_offset).
fn store_y(i: u32, v: f32) {
    x[p.x_offset + i] = v;
}
