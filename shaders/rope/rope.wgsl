// Rotary position embedding, in place, over rows of head_dim: row r = t * n_heads + h holds
// head h of token t, at position pos[pos_offset + t] (read from the GPU, so a replayed step
// needs no new parameters). The first n_rot dims rotate in n_rot/2 pairs; pair i turns by
// pos * freqs[i] (frequencies computed once on the CPU, including base, scaling and any
// per-dimension factors). NEOX = 1 pairs (i, i + n_rot/2), NEOX = 0 pairs (2i, 2i + 1).
// One invocation per pair. BACKWARD = 1 turns each pair by -angle instead: the rotation's
// transpose, which maps dL/dy to dL/dx (rope_backward), with the same sin and cos.

struct Params {
    head_dim: u32,
    n_rot: u32,
    n_heads: u32,
    n_tokens: u32,
    x_offset: u32,
    pos_offset: u32,
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> x: array<f32>;
@group(0) @binding(2) var<storage, read> pos: array<u32>;
@group(0) @binding(3) var<storage, read> freqs: array<f32>;

override WG: u32 = 64u;
override NEOX: u32 = 1u;
override BACKWARD: u32 = 0u;

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) tid: u32,
) {
    let half = p.n_rot / 2u;
    let idx = (wid.y * nwg.x + wid.x) * WG + tid;
    if idx >= p.n_tokens * p.n_heads * half {
        return;
    }
    let i = idx % half;
    let row = idx / half;
    let t = row / p.n_heads;
    let a = f32(pos[p.pos_offset + t]) * freqs[i];
    let c = cos(a);
    let s = select(sin(a), -sin(a), BACKWARD == 1u);
    let base = p.x_offset + row * p.head_dim;
    var j0 = base + 2u * i;
    var j1 = j0 + 1u;
    if NEOX == 1u {
        j0 = base + i;
        j1 = j0 + half;
    }
    let x0 = x[j0];
    let x1 = x[j1];
    x[j0] = x0 * c - x1 * s;
    x[j1] = x0 * s + x1 * c;
}
