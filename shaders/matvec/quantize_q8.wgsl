// Quantizes a vector of n f32 inputs (n a multiple of 32) into the q8 layout that
// matvec/x_q8.wgsl reads (`ops::quantize` in Rust describes it): two planes of n / 4 words of
// int8 digits, 4 per word little-endian (the first digits q1, then the second digits q2),
// then the n / 32 block scales as f32 bits; input i stands for d (q1_i + q2_i / 254). The
// rule per block (d = amax / 127 and two rounded digits) is matvec/q8_block.wgsl's, which
// residual_norm's q8 output includes as well. The inputs come through `x_in(i)` (input i of
// the vector), defined by the input file: matvec/quantize_x.wgsl (a vector) or
// matvec/quantize_glu.wgsl (act(gate) * up, computed as it is read).
//
// 8 lanes per block, lane k owning inputs 4k .. 4k + 4 of it (one output word of each
// digit): each lane loads its 4 inputs once and keeps them in registers, the block's amax
// goes through workgroup memory (8 reads per lane), and the lanes write their words side by
// side. One dispatch for the vector; blocks are independent, so any number of workgroups.

struct Params {
    // Inputs (a multiple of 32).
    n: u32,
    // Where the input (or the gate) starts.
    x_offset: u32,
    // Where `up` starts (quantize_glu.wgsl only; 0 otherwise).
    up_offset: u32,
    // Word index of the first quant in q; the second digits follow at q_offset + n / 4, the
    // scales at q_offset + n / 2.
    q_offset: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> q: array<u32>;
// Binding 2 (and 3) is the input, declared by the input file with `x_in`.

// Invocations per workgroup: a multiple of 8, at most 256 (q8_block.wgsl's `amax_part`).
override WG: u32 = 64u;

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) tid: u32,
) {
    // The output word (of each digit) this lane writes: inputs 4 * word .. 4 * word + 4.
    let word = (wid.y * nwg.x + wid.x) * WG + tid;
    // n is a multiple of 32, so a block's 8 lanes are all live or all past the end.
    let live = 4u * word < p.n;
    var v = vec4<f32>(0.0);
    if live {
        let i = 4u * word;
        v = vec4<f32>(x_in(i), x_in(i + 1u), x_in(i + 2u), x_in(i + 3u));
    }
    // Every lane reaches the barrier inside (uniform control flow); only live lanes store.
    let amax = q8_block_amax(v, tid);
    if live {
        q8_store(p.q_offset, p.n, word, v, amax);
    }
}
