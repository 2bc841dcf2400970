// An invocation's share of a block's next rows on their way from global memory to `tile`: the
// tensor-core attention kernels whose 256 invocations stage 32 rows of HD values (the forward
// tile, attention/coop_forward_tile.wgsl; dq, attention/train_backward_dq_coop.wgsl) load
// them into `staged` before the products that precede their use and store them after the
// barrier that frees `tile` (each kernel declares `tile`, RS, HD and WG).
//
// `staged` is only ever indexed by constants (each kernel's load_block sets its shares
// 0 .. HD / 32 - 1 one by one, as store_block reads them): a private array indexed by a loop
// variable may live in local memory, and did on an H200 (docs/PERF.md, D-staged-registers:
// the prompt attention at 8,192 tokens 18.7 -> 9.1 ms a layer).

var<private> staged: array<vec4<f16>, 8>;

// Share u of `staged` into `tile`: row i / (HD / 4) of the block, i = tid + WG u.
fn store_staged(tid: u32, u: u32) {
    let i = tid + WG * u;
    tile[(i / (HD / 4u)) * RS + i % (HD / 4u)] = staged[u];
}

// `staged` into `tile` (after a barrier that frees it).
fn store_block(tid: u32) {
    store_staged(tid, 0u);
    store_staged(tid, 1u);
    if HD >= 128u {
        store_staged(tid, 2u);
        store_staged(tid, 3u);
    }
    if HD >= 256u {
        store_staged(tid, 4u);
        store_staged(tid, 5u);
        store_staged(tid, 6u);
        store_staged(tid, 7u);
    }
}
