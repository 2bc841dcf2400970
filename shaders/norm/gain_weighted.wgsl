// The RMS norm backward's gain: the forward's weight vector (length n, shared by every row).

@group(0) @binding(4) var<storage, read> weight: array<f32>;

fn gain(i: u32) -> f32 {
    return weight[i];
}
