// LoRA dropout's mask, shared by the in-place (dropout.wgsl) and the out-of-place
// (dropout_out.wgsl) entry: element i's factor keep(i) / (1 - p), keep(i) false with
// probability p. The draw is a hash of the mask's seed (two words) and the element's index i,
// not a stream: any element's factor is a function of (seed, i) alone, so the backward
// recomputes the mask its forward used from the same seed, and a resumed run draws the same
// masks. The hash is murmur3's 32-bit finalizer over the index mixed with each seed word; its
// top 24 bits make a uniform u in [0, 1), dropped where u < p. `y_offset` is the out-of-place
// output's; the in-place entry ignores it.

struct Params {
    n: u32,
    offset: u32,
    seed_lo: u32,
    seed_hi: u32,
    p: f32,
    keep_scale: f32,
    y_offset: u32,
    _pad0: u32,
}

@group(0) @binding(0) var<uniform> p: Params;

override WG: u32 = 256u;

fn fmix32(h0: u32) -> u32 {
    var h = h0;
    h ^= h >> 16u;
    h *= 0x85ebca6bu;
    h ^= h >> 13u;
    h *= 0xc2b2ae35u;
    h ^= h >> 16u;
    return h;
}

fn keep_factor(i: u32) -> f32 {
    let h = fmix32(fmix32(i ^ p.seed_lo) ^ p.seed_hi);
    let u = f32(h >> 8u) * (1.0 / 16777216.0);
    var f = p.keep_scale;
    if u < p.p {
        f = 0.0;
    }
    return f;
}
