// The attention's query as it is (prompt blocks, and decode after head_norm_rope_kv): lane
// `lane` of head h of token t reads its 8 dims of q. The caches are only read; no fresh key.

@group(0) @binding(2) var<storage, read> kc: array<KvWord>;
@group(0) @binding(3) var<storage, read> vc: array<KvWord>;

var<private> q_lane: Query;

fn query_begin(t: u32, h: u32, split: u32, tile: u32, kvh: u32, lane: u32, tid: u32) {
    let qb = p.q_offset + t * p.q_stride + h * HD + 4u * lane;
    let qh = qb + HD / 2u;
    q_lane = Query(
        vec4<f32>(qv[qb], qv[qb + 1u], qv[qb + 2u], qv[qb + 3u]),
        vec4<f32>(qv[qh], qv[qh + 1u], qv[qh + 2u], qv[qh + 3u]),
    );
}

fn query_end(split: u32, kvh: u32, lane: u32, tid: u32) -> Query {
    return q_lane;
}
