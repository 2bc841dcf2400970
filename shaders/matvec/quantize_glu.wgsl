// Input of matvec/quantize_q8.wgsl through a gated linear unit, computed as it is read:
// input i is act(gate[i]) * up[i] (act from elementwise/act.wgsl, the ACT override), the
// same expression as elementwise/glu.wgsl and matvec/x_glu.wgsl, with gate at x_offset and
// up at up_offset; the two may be one buffer (the fused gate|up matvec output) bound twice.
@group(0) @binding(2) var<storage, read> gate: array<f32>;
@group(0) @binding(3) var<storage, read> up: array<f32>;

// Input i of the vector.
fn x_in(i: u32) -> f32 {
    return act(gate[p.x_offset + i]) * up[p.up_offset + i];
}
