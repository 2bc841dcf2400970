// The per-element arithmetic of a per-head RMS norm and RoPE, shared by rope/head_norm_rope.wgsl
// and the rotating query of the decode attention (attention/q_rope.wgsl), so both kernels
// round every element alike. NEOX is the including kernel's override.

// Dims of rotation pair j of a head whose first n_rot dims rotate: (j, j + n_rot/2) (NEOX) or
// (2j, 2j + 1); pairs past n_rot / 2 are the unrotated dims (2j, 2j + 1).
fn rope_dims(j: u32, n_rot: u32) -> vec2<u32> {
    let half = n_rot / 2u;
    if NEOX == 1u && j < half {
        return vec2<u32>(j, j + half);
    }
    return vec2<u32>(2u * j, 2u * j + 1u);
}

// One pair's share of a head's sum of squares.
fn square_pair(x0: f32, x1: f32) -> f32 {
    return x0 * x0 + x1 * x1;
}

// 1 / rms of a head of n values whose squares sum to ss.
fn norm_scale(ss: f32, n: u32, eps: f32) -> f32 {
    return 1.0 / sqrt(ss / f32(n) + eps);
}

// A value normed: x * r * gain.
fn normed(x: f32, r: f32, g: f32) -> f32 {
    return x * r * g;
}

// Pair (x0, x1) turned by angle a (= position * frequency).
fn rotate_pair(x: vec2<f32>, a: f32) -> vec2<f32> {
    let c = cos(a);
    let s = sin(a);
    return vec2<f32>(x.x * c - x.y * s, x.x * s + x.y * c);
}
