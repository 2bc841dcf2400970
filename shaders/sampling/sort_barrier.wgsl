// topk.wgsl's entry point, sorting with workgroup barriers only (any device): the block in
// workgroup memory, one barrier a stage of topk.wgsl's network (49 at B = 1024; 28 over a
// previous level's sorted runs, `first_merge`). At stage (size, stride), pair (i, i + stride)
// is ordered as `keeps_better` says: best first where bit `size` of i is 0, worst first where
// it is 1, the better entry in the lower half at a halving; the block's first K end up its
// best, in order.
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
        for (var stride = size >> 1u; stride > 0u; stride = next_stride(size, stride)) {
            for (var t = tid; t < B / 2u; t += WG) {
                let i = 2u * t - (t & (stride - 1u));
                let j = i + stride;
                if better(keys[i], ids[i], keys[j], ids[j]) != keeps_better(i, size, stride) {
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
