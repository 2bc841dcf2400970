// head_norm_rope with a KV cache (kv_append folded in, one dispatch fewer a layer): each k
// workgroup also stores its finished head h of token t into row (h, pos[pos_offset + t]) of
// the layer's K cache, and the same token's v head, unchanged, into the V cache. Caches are
// [k_heads, max_len, head_dim], values in pairs (2i, 2i + 1) through store_k / store_v of
// attention/kv_store_<dtype>.wgsl (KvWord: kv_load_<dtype>.wgsl), so they hold exactly what
// kv_append would store from the finished k. Token t's v head h starts at
// v_offset + t * v_stride + h * head_dim. Positions >= max_len are dropped, as kv_append does.
//
// Under NEOX an invocation holds dims (j, j + n_rot/2), not the pairs a cache word holds, so
// the head goes through workgroup memory: `keep` writes each finished pair there, and
// `cache_head` (after a barrier) stores it pair by pair.

// Read only, but bound read_write: in decode v shares a buffer with q and k, which are written.
@group(0) @binding(7) var<storage, read_write> v_src: array<f32>;
@group(0) @binding(8) var<storage, read_write> kc: array<KvWord>;
@group(0) @binding(9) var<storage, read_write> vc: array<KvWord>;

// The finished head (head_dim <= 2 * PAIRS * WG = 512).
var<workgroup> head_row: array<f32, 512>;

fn keep(d: vec2<u32>, y: vec2<f32>) {
    head_row[d.x] = y.x;
    head_row[d.y] = y.y;
}

fn cache_head(t: u32, h: u32, tid: u32) {
    workgroupBarrier();
    let at = pos[p.pos_offset + t];
    if at < p.max_len {
        let half = p.head_dim / 2u;
        let dst = (h * p.max_len + at) * half;
        let src = p.v_offset + t * p.v_stride + h * p.head_dim;
        for (var i = tid; i < half; i += WG) {
            store_k(dst + i, vec2<f32>(head_row[2u * i], head_row[2u * i + 1u]));
            store_v(dst + i, vec2<f32>(v_src[src + 2u * i], v_src[src + 2u * i + 1u]));
        }
    }
}
