// A selection level that only selects (topk.wgsl): its parameters, and its end: the block's
// best K stored for the next level.

struct Params {
    // Entries in the input.
    n: u32,
    // Where the input starts: in `x` (level 0) or in `cand`.
    src_offset: u32,
    // Where this level's lists start in `cand` (block b writes K entries at b * K).
    dst_offset: u32,
    // 1: read logits from `x`, ids are positions; 0: read (key, id) pairs from `cand`.
    from_x: u32,
}

@group(0) @binding(0) var<uniform> p: Params;

fn level_end(tid: u32, block: u32) {
    store_best(tid, block);
}
