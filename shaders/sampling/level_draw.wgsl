// The last selection level (one block, topk.wgsl), which draws the token from its sorted
// block (sampling/draw.wgsl) instead of storing it for a dispatch of its own: the level's
// parameters, then the draw's (`SampleParams` in ops/sample.rs, rewritten every step; 16
// words in all, no padding), and the token's output at binding 3.

struct Params {
    n: u32,
    src_offset: u32,
    dst_offset: u32,
    from_x: u32,
    // The draw's (`SampleParams`); its candidates are the sorted block in workgroup memory.
    out_index: u32,
    // 1..=K.
    k: u32,
    min_keep: u32,
    // <= 0: greedy (the best candidate, no draw).
    temperature: f32,
    // >= 1: off.
    top_p: f32,
    // <= 0: off.
    min_p: f32,
    // ln(min_p), computed by the host in f32 as the CPU sampler does, so the threshold
    // max + ln(min_p) is the same correctly rounded sum on both sides.
    ln_min_p: f32,
    // Uniform in [0, 1), a multiple of 2^-24.
    u: f32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(3) var<storage, read_write> out: array<u32>;

// Candidate i of the draw: entry i of the sorted block.
fn candidate(i: u32) -> vec2<u32> {
    return vec2<u32>(keys[i], ids[i]);
}

fn store_token(id: u32) {
    out[p.out_index] = id;
}

// The draw instead of storing the best K (nobody would read them). Every invocation calls
// this (uniform control flow: the entry's early return depends on the workgroup id only),
// with the sorted block in keys / ids.
fn level_end(tid: u32, block: u32) {
    workgroupBarrier();
    draw_values(tid);
    workgroupBarrier();
    if tid == 0u {
        draw();
    }
}
