// topk.wgsl's entry point, sorting with workgroup barriers only (any device): the block in
// workgroup memory, one barrier a bitonic stage (55 at B = 1024; 34 over a previous level's
// sorted runs, `first_merge`). At stage (size, stride), pair (i, i + stride) is ordered best
// first where bit `size` of i is 0 and worst first where it is 1; the last merge (size = B)
// orders the whole block best first.
@compute @workgroup_size(WG)
fn main(
    @builtin(local_invocation_index) tid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
) {
    let block = block_index(wid, nwg);
    if block * B >= p.n {
        return;
    }
    load_block(tid, block);
    workgroupBarrier();
    for (var size = first_merge(); size <= B; size <<= 1u) {
        for (var stride = size >> 1u; stride > 0u; stride >>= 1u) {
            for (var t = tid; t < B / 2u; t += WG) {
                let i = 2u * t - (t & (stride - 1u));
                let j = i + stride;
                let best_first = (i & size) == 0u;
                if better(keys[i], ids[i], keys[j], ids[j]) != best_first {
                    let k = keys[i];
                    keys[i] = keys[j];
                    keys[j] = k;
                    let d = ids[i];
                    ids[i] = ids[j];
                    ids[j] = d;
                }
            }
            workgroupBarrier();
        }
    }
    level_end(tid, block);
}
