// Cross-entropy loss head with its gradient written over the logits. Row r holds the raw
// LM-head output x (vocab values at logits_offset + r vocab) and its target t at
// targets_offset + r. z = c tanh(x / c) with c = softcap (Gemma 2's final soft-cap), or z = x
// where softcap is 0. The kernel writes
//   loss[loss_offset + r] = lse(z) - z[t]
//   x_i <- weight (softmax(z)_i - [i == t]) dz_i/dx_i,   dz/dx = 1 - tanh^2(x / c) (or 1),
// and for a masked row (t >= vocab: u32::MAX marks it) a loss of 0 and a row of zeros.
//
// One workgroup of WG (256, a power of two) per row, two passes over the row and no scratch
// of the row's size (the vocabulary can be 262,144 wide): pass 1 keeps an online softmax,
// a running max m and sum s of exp(z - m) per invocation, merged over the workgroup by a
// tree; pass 2 recomputes z and overwrites x with its gradient. Each merge calls exp once,
// on the side whose max is lower, never exp(0): WGSL does not promise exp(0) = 1.

// Params, targets, loss, capped, merge, row_lse: loss/cross_entropy_common.wgsl.

@group(0) @binding(1) var<storage, read_write> logits: array<f32>;

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
    let base = p.logits_offset + row * p.vocab;
    let t = targets[p.targets_offset + row];
    let masked = t >= p.vocab;
    // A masked row skips pass 1 but still meets every barrier (they need uniform control).
    let end = select(p.vocab, 0u, masked);

    var ms = vec2<f32>(LOWEST, 0.0);
    for (var i = tid; i < end; i += WG) {
        ms = merge(ms, vec2<f32>(capped(logits[base + i]).x, 1.0));
    }
    // The target's z, read before any invocation overwrites the row (the storage barrier
    // below keeps this read ahead of pass 2's writes).
    var zt = 0.0;
    if tid == 0u && !masked {
        zt = capped(logits[base + t]).x;
    }

    let lse = row_lse(ms, tid);
    storageBarrier();

    if tid == 0u {
        loss[p.loss_offset + row] = select(lse - zt, 0.0, masked);
    }
    for (var i = tid; i < p.vocab; i += WG) {
        var g = 0.0;
        if !masked {
            let zd = capped(logits[base + i]);
            let q = exp(zd.x - lse);
            g = p.weight * select(q, q - 1.0, i == t) * zd.y;
        }
        logits[base + i] = g;
    }
}
