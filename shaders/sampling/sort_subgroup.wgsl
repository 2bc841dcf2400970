// topk.wgsl's entry point, sorting with subgroup shuffles (Features::SUBGROUP, one subgroup
// size, a divisor of WG of at least 4): the same network as sampling/sort_barrier.wgsl
// (topk.wgsl's, which keeps the block's best K), with the block in registers. Invocation j
// (numbered in subgroup order: j = subgroup * size + lane, so the lanes of a subgroup hold
// consecutive entries) holds entries 4 j .. 4 j + 3 as two vec4s (keys, ids). A stage's pairs
// (i, i ^ stride) then lie in one invocation (stride 1, 2: compared in registers), in one
// subgroup (stride < 4 sg_size: the partner's entries come through subgroupShuffleXor) or
// across subgroups (stride >= 4 sg_size: through workgroup memory, two barriers). At
// B = 1024 and a subgroup of 32 that is 3 of the 49 stages against every one in
// sort_barrier.wgsl.

// Entries a, b ordered best first (or worst first): (key a, key b, id a, id b).
fn order_pair(ka: u32, kb: u32, da: u32, db: u32, best_first: bool) -> vec4<u32> {
    if better(ka, da, kb, db) == best_first {
        return vec4<u32>(ka, kb, da, db);
    }
    return vec4<u32>(kb, ka, db, da);
}

// What entry i keeps of the pair (i, i ^ stride), given the partner's values: the better one
// where i is the pair's lower index of a best-first pair (or the upper of a worst-first one),
// else the worse. Per component, for an invocation's 4 entries.
fn keep(k: vec4<u32>, d: vec4<u32>, pk: vec4<u32>, pd: vec4<u32>, want_better: bool) -> array<vec4<u32>, 2> {
    let take = better4(k, d, pk, pd) == vec4<bool>(want_better);
    return array<vec4<u32>, 2>(select(pk, k, take), select(pd, d, take));
}

// Entries base .. base + 4 from workgroup memory: (keys, ids).
fn take4(base: u32) -> array<vec4<u32>, 2> {
    let k = vec4<u32>(keys[base], keys[base + 1u], keys[base + 2u], keys[base + 3u]);
    let d = vec4<u32>(ids[base], ids[base + 1u], ids[base + 2u], ids[base + 3u]);
    return array<vec4<u32>, 2>(k, d);
}

// Entries base .. base + 4 into workgroup memory. Components named, never indexed by a
// variable: a vector indexed in a loop may be demoted to (slow) local memory.
fn put4(base: u32, k: vec4<u32>, d: vec4<u32>) {
    keys[base] = k.x;
    keys[base + 1u] = k.y;
    keys[base + 2u] = k.z;
    keys[base + 3u] = k.w;
    ids[base] = d.x;
    ids[base + 1u] = d.y;
    ids[base + 2u] = d.z;
    ids[base + 3u] = d.w;
}

@compute @workgroup_size(WG)
fn main(
    @builtin(local_invocation_index) tid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(subgroup_id) sg: u32,
    @builtin(subgroup_invocation_id) lane: u32,
    @builtin(subgroup_size) sg_size: u32,
) {
    let block = block_index(wid, nwg);
    if block * B >= p.n {
        return;
    }
    load_block(tid, block);
    workgroupBarrier();
    let base = 4u * (sg * sg_size + lane);
    let mine = take4(base);
    var k = mine[0];
    var d = mine[1];
    let wide = 4u * sg_size;
    for (var size = first_merge(); size <= B; size <<= 1u) {
        for (var stride = size >> 1u; stride > 0u; stride = next_stride(size, stride)) {
            if stride >= 4u {
                // For every entry of the invocation alike: stride and size are >= 4.
                let want_better = keeps_better(base, size, stride);
                var pk: vec4<u32>;
                var pd: vec4<u32>;
                if stride >= wide {
                    workgroupBarrier();
                    put4(base, k, d);
                    workgroupBarrier();
                    let partner = take4(base ^ stride);
                    pk = partner[0];
                    pd = partner[1];
                } else {
                    pk = subgroupShuffleXor(k, stride / 4u);
                    pd = subgroupShuffleXor(d, stride / 4u);
                }
                let kd = keep(k, d, pk, pd, want_better);
                k = kd[0];
                d = kd[1];
            } else if stride == 2u {
                // Pairs (0, 2) and (1, 3); size >= 4, so one direction for both.
                let bf = (base & size) == 0u;
                let a = order_pair(k.x, k.z, d.x, d.z, bf);
                let b = order_pair(k.y, k.w, d.y, d.w, bf);
                k = vec4<u32>(a.x, b.x, a.y, b.y);
                d = vec4<u32>(a.z, b.z, a.w, b.w);
            } else {
                // Pairs (0, 1) and (2, 3), each with its own direction at size 2.
                let a = order_pair(k.x, k.y, d.x, d.y, (base & size) == 0u);
                let b = order_pair(k.z, k.w, d.z, d.w, ((base + 2u) & size) == 0u);
                k = vec4<u32>(a.x, a.y, b.x, b.y);
                d = vec4<u32>(a.z, a.w, b.z, b.w);
            }
        }
    }
    workgroupBarrier();
    put4(base, k, d);
    workgroupBarrier();
    level_end(tid, block);
}
