// Matvec input through a gated linear unit, computed as it is read: input i is
// act(gate[i]) * up[i] (act from elementwise/act.wgsl, the ACT override), with gate at
// x_offset and up at up_offset; the two may be one buffer (the fused gate|up matvec output)
// bound twice. Every workgroup recomputes act for the inputs it reads: next to the weights it
// streams that is a few instructions per input, and it saves the glu dispatch and the round
// trip of its output through memory.

@group(0) @binding(2) var<storage, read> gate: array<vec4<f32>>;
@group(0) @binding(5) var<storage, read> up: array<vec4<f32>>;

// End of the gate (exclusive): inputs past n_in read as zero.
var<private> x_end: u32;
// Both offsets multiples of 4: every x4(i) the parts ask for is then two aligned vec4 loads.
var<private> x_aligned: bool;
// up's index minus gate's (mod 2^32).
var<private> up_shift: u32;
// As in x_plain.wgsl: false for rows of whole blocks, whose reads need no check.
override PARTIAL_UNITS: bool = true;

fn x_begin(row0: u32, tid: u32) {
    x_end = p.x_offset + p.n_in;
    x_aligned = ((p.x_offset | p.up_offset) & 3u) == 0u;
    up_shift = p.up_offset - p.x_offset;
}

// gate[i] and up[i] (as the index into gate), zeros past n_in (act(0) * 0 = 0).
fn gate1(i: u32) -> f32 {
    let j = min(i, x_end - 1u);
    return select(0.0, gate[j >> 2u][j & 3u], i < x_end);
}

fn up1(i: u32) -> f32 {
    let k = min(i, x_end - 1u) + up_shift;
    return select(0.0, up[k >> 2u][k & 3u], i < x_end);
}

// Inputs i .. i + 4, zero past n_in. One act per input on either path (the unaligned one
// gathers the scalars first), so a dot file's inlined x4 calls carry 4 activations each.
fn x4(i: u32) -> vec4<f32> {
    var g: vec4<f32>;
    var u: vec4<f32>;
    // No check for rows of whole blocks, as in x_plain.wgsl.
    if !PARTIAL_UNITS || (x_aligned && i + 3u < x_end) {
        g = gate[i >> 2u];
        u = up[(i + up_shift) >> 2u];
    } else {
        g = vec4<f32>(gate1(i), gate1(i + 1u), gate1(i + 2u), gate1(i + 3u));
        u = vec4<f32>(up1(i), up1(i + 1u), up1(i + 2u), up1(i + 3u));
    }
    return vec4<f32>(act(g.x), act(g.y), act(g.z), act(g.w)) * u;
}

// The factor of the row totals: none.
fn x_scale(tid: u32) -> f32 {
    return 1.0;
}
