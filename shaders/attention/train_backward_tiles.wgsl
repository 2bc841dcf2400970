// The backward programs' second tile product (with attention/train_tiles.wgsl): dp = do . v
// over the tile, staged as q . k is, and on the way each pair's D = do . o: the invocation
// staging dims d..d + 3 of a pair's do row also multiplies them by its o row, and the four
// invocations of that row leave their partial sums in `d_parts` (pair r's at 4 r .. 4 r + 3).

var<workgroup> d_parts: array<f32, 128>; // 4 * BQ

fn do_vec4(base: u32, d: u32) -> vec4<f32> {
    let l = p.dv - 1u;
    let x = vec4<f32>(
        dout[base + min(d, l)],
        dout[base + min(d + 1u, l)],
        dout[base + min(d + 2u, l)],
        dout[base + min(d + 3u, l)],
    );
    return select(vec4<f32>(0.0), x, row_mask(d, p.dv));
}

fn o_vec4(base: u32, d: u32) -> vec4<f32> {
    let l = p.dv - 1u;
    let x = vec4<f32>(
        o[base + min(d, l)],
        o[base + min(d + 1u, l)],
        o[base + min(d + 2u, l)],
        o[base + min(d + 3u, l)],
    );
    return select(vec4<f32>(0.0), x, row_mask(d, p.dv));
}

fn v_vec4(base: u32, d: u32) -> vec4<f32> {
    let l = p.dv - 1u;
    let x = vec4<f32>(
        v[base + min(d, l)],
        v[base + min(d + 1u, l)],
        v[base + min(d + 2u, l)],
        v[base + min(d + 3u, l)],
    );
    return select(vec4<f32>(0.0), x, row_mask(d, p.dv));
}

// This invocation's four entries of do . v over the tile (pairs e0.., keys j0.. of kv head
// g), with every pair's D in d_parts (read after a barrier). Holds barriers: call in uniform
// control flow.
fn dov_dots(g: u32, e0: u32, j0: u32, tid: u32) -> vec4<f32> {
    let r = (tid % 128u) / 4u;
    let x = tid % 4u;
    var part = 0.0;
    var s = vec4<f32>(0.0);
    for (var d0 = 0u; d0 < p.dv; d0 += DC) {
        let d = d0 + 4u * x;
        if tid < 128u {
            var a = vec4<f32>(0.0);
            if e0 + r < pair_count() {
                let row = pair_row(g, e0 + r) * p.dv;
                a = do_vec4(p.do_offset + row, d);
                part += dot(a, o_vec4(p.o_offset + row, d));
            }
            a_tile[r * DC4 + x] = a;
        } else {
            var b = vec4<f32>(0.0);
            if j0 + r < p.n {
                b = v_vec4(p.v_offset + ((j0 + r) * p.n_kv + g) * p.dv, d);
            }
            b_tile[r * DC4 + x] = b;
        }
        workgroupBarrier();
        s = chunk_dots(s, tid);
        workgroupBarrier();
    }
    if tid < 128u {
        d_parts[tid] = part;
    }
    return s;
}

// Pair r's D = do . o from d_parts (after the barrier that follows dov_dots).
fn pair_delta(r: u32) -> f32 {
    let at = 4u * r;
    return (d_parts[at] + d_parts[at + 1u]) + (d_parts[at + 2u] + d_parts[at + 3u]);
}
