// The cross-entropy kernels' shared part (loss/cross_entropy.wgsl, one f32 at a time, and
// loss/cross_entropy_vec4.wgsl, four, where every row starts 16-byte aligned): their Params,
// bindings but the logits (binding 1), the soft-cap and the online softmax's merge and tree.

struct Params {
    n_rows: u32,
    vocab: u32,
    logits_offset: u32,
    targets_offset: u32,
    loss_offset: u32,
    softcap: f32,
    weight: f32,
    _pad0: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> targets: array<u32>;
@group(0) @binding(3) var<storage, read_write> loss: array<f32>;

override WG: u32 = 256u;

// The running max before any element: the lowest finite f32, so that merging two empty
// invocations computes exp(0) * 0, never inf - inf.
const LOWEST: f32 = -3.40282347e38;

var<workgroup> tree_m: array<f32, 256>;
var<workgroup> tree_s: array<f32, 256>;

// (z, dz/dx) of a raw logit.
fn capped(x: f32) -> vec2<f32> {
    if p.softcap > 0.0 {
        let t = tanh(x / p.softcap);
        return vec2<f32>(p.softcap * t, 1.0 - t * t);
    }
    return vec2<f32>(x, 1.0);
}

// Two (max, sum of exp(z - max)) pairs as one.
fn merge(a: vec2<f32>, b: vec2<f32>) -> vec2<f32> {
    if b.x > a.x {
        return vec2<f32>(b.x, a.y * exp(a.x - b.x) + b.y);
    }
    return vec2<f32>(a.x, a.y + b.y * exp(b.x - a.x));
}

// The row's log-sum-exp from each invocation's (max, sum of exp(z - max)), merged by a tree
// through workgroup memory. Called by every invocation in uniform control flow (barriers).
fn row_lse(ms: vec2<f32>, tid: u32) -> f32 {
    tree_m[tid] = ms.x;
    tree_s[tid] = ms.y;
    workgroupBarrier();
    for (var h = WG / 2u; h > 0u; h >>= 1u) {
        if tid < h {
            let merged = merge(vec2<f32>(tree_m[tid], tree_s[tid]),
                vec2<f32>(tree_m[tid + h], tree_s[tid + h]));
            tree_m[tid] = merged.x;
            tree_s[tid] = merged.y;
        }
        workgroupBarrier();
    }
    return tree_m[0] + log(tree_s[0]);
}
