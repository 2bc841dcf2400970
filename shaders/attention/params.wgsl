// The attention kernels' shared contract (attention.wgsl, attention_coop.wgsl; Rust's
// `AttentionParams`): the parameters, the bindings every variant has (the query at 1, the
// positions at 4, the output at 5; the caches at 2 and 3 are declared by each kernel's own
// files, read-only or not), and which keys a row sees. Row r = t * group + g is head
// kvh * group + g of token t, at position pos[pos_offset + t]; it attends to keys j in
// [lo, at], lo = at + 1 - window (0 when window = 0 or at < window): causal by position.

struct Params {
    n_tokens: u32,
    n_heads: u32,
    group: u32,
    max_len: u32,
    q_offset: u32,
    q_stride: u32,
    out_offset: u32,
    pos_offset: u32,
    window: u32,
    split_len: u32,
    // attention.wgsl: splits of split_len positions each (flash decoding); attention_coop.wgsl:
    // splits of each row tile's keys (split_share), 1 unsplit.
    n_splits: u32,
    // Where the splits' records start: in `splits` (attention.wgsl), in `out` (attention_coop.wgsl's
    // maxima and sums); n_splits > 1.
    records: u32,
    scale: f32,
    softcap: f32,
    // The rotating query's (attention/q_rope.wgsl; unused by the other kernels).
    n_rot: u32,
    eps: f32,
    k_offset: u32,
    v_offset: u32,
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> qv: array<f32>;
@group(0) @binding(4) var<storage, read> pos: array<u32>;
@group(0) @binding(5) var<storage, read_write> out: array<f32>;

// Keys [lo, hi) that row r (valid) attends to.
fn row_keys(r: u32) -> vec2<u32> {
    let at = pos[p.pos_offset + r / p.group];
    var lo = 0u;
    if p.window > 0u && at + 1u > p.window {
        lo = at + 1u - p.window;
    }
    return vec2<u32>(lo, min(at + 1u, p.max_len));
}
