// KV cache append: for token t (at position pos[pos_offset + t]) and kv head h, copy the
// head_dim values of K and V into row (h, pos) of the caches, laid out [n_kv_heads, max_len,
// head_dim]. Values go in pairs (`store_k` / `store_v` come from kv_store_<dtype>.wgsl: f32
// pairs, or two f16 packed in one u32 word). Token t's K row starts at
// k_offset + t * src_stride + h * head_dim (src_stride: the width of the fused qkv row).
// One invocation per pair; positions >= max_len are dropped.

struct Params {
    n_tokens: u32,
    n_kv_heads: u32,
    head_dim: u32,
    max_len: u32,
    k_offset: u32,
    v_offset: u32,
    src_stride: u32,
    pos_offset: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> k_src: array<f32>;
@group(0) @binding(2) var<storage, read> v_src: array<f32>;
@group(0) @binding(3) var<storage, read> pos: array<u32>;
// KvWord: the cache's element (kv_load_<dtype>.wgsl).
@group(0) @binding(4) var<storage, read_write> kc: array<KvWord>;
@group(0) @binding(5) var<storage, read_write> vc: array<KvWord>;

override WG: u32 = 64u;

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) tid: u32,
) {
    let half = p.head_dim / 2u;
    let idx = (wid.y * nwg.x + wid.x) * WG + tid;
    if idx >= p.n_tokens * p.n_kv_heads * half {
        return;
    }
    let i = idx % half;
    let r = idx / half;
    let h = r % p.n_kv_heads;
    let t = r / p.n_kv_heads;
    let at = pos[p.pos_offset + t];
    if at >= p.max_len {
        return;
    }
    let s = t * p.src_stride + h * p.head_dim + 2u * i;
    let dst = (h * p.max_len + at) * half + i;
    store_k(dst, vec2<f32>(k_src[p.k_offset + s], k_src[p.k_offset + s + 1u]));
    store_v(dst, vec2<f32>(v_src[p.v_offset + s], v_src[p.v_offset + s + 1u]));
}
