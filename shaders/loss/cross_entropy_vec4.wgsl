// loss/cross_entropy.wgsl's contract (read its header) four logits at a time, for rows that
// start 16-byte aligned (logits_offset and vocab multiples of 4; the Rust side picks this
// kernel only then): each invocation loads and stores vec4s, two a step in pass 1, so that a
// row's 256 invocations keep enough bytes in flight to stream the row (one f32 a load left
// the loss at about a third of the memory's rate). The same arithmetic: each element enters
// the online softmax by one merge, and pass 2 computes each gradient as the scalar kernel.

// Params, targets, loss, capped, merge, row_lse: loss/cross_entropy_common.wgsl.

@group(0) @binding(1) var<storage, read_write> logits: array<vec4<f32>>;

// The four elements of `x` into the running (max, sum).
fn merge4(ms: vec2<f32>, x: vec4<f32>) -> vec2<f32> {
    var m = merge(ms, vec2<f32>(capped(x.x).x, 1.0));
    m = merge(m, vec2<f32>(capped(x.y).x, 1.0));
    m = merge(m, vec2<f32>(capped(x.z).x, 1.0));
    return merge(m, vec2<f32>(capped(x.w).x, 1.0));
}

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) tid: u32,
) {
    let row = wid.y * nwg.x + wid.x;
    if row >= p.n_rows {
        return;
    }
    let base = (p.logits_offset + row * p.vocab) / 4u;
    let n4 = p.vocab / 4u;
    let t = targets[p.targets_offset + row];
    let masked = t >= p.vocab;
    // A masked row skips pass 1 but still meets every barrier (they need uniform control).
    let end = select(n4, 0u, masked);

    var ms = vec2<f32>(LOWEST, 0.0);
    var i = tid;
    for (; i + WG < end; i += 2u * WG) {
        let a = logits[base + i];
        let b = logits[base + i + WG];
        ms = merge4(merge4(ms, a), b);
    }
    if i < end {
        ms = merge4(ms, logits[base + i]);
    }
    // The target's z, read before any invocation overwrites the row.
    var zt = 0.0;
    if tid == 0u && !masked {
        zt = capped(logits[base + t / 4u][t % 4u]).x;
    }

    let lse = row_lse(ms, tid);
    storageBarrier();

    if tid == 0u {
        loss[p.loss_offset + row] = select(lse - zt, 0.0, masked);
    }
    for (var j = tid; j < n4; j += WG) {
        var g = vec4<f32>(0.0);
        if !masked {
            let x = logits[base + j];
            for (var c = 0u; c < 4u; c++) {
                let zd = capped(x[c]);
                let q = exp(zd.x - lse);
                g[c] = p.weight * select(q, q - 1.0, 4u * j + c == t) * zd.y;
            }
        }
        logits[base + j] = g;
    }
}
