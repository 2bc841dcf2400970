// The f32 tile products' accumulators (matmul/matmul.wgsl, matmul/grad_tile.wgsl): an
// invocation's 8 x 4 outputs as eight named vec4 registers, acc<a> holding its tile row a's
// four columns. Not an array: one indexed in a loop is kept in memory by the driver
// (docs/PERF.md, D-named-registers).

// Zero when an invocation starts (private variables are zero-initialised).
var<private> acc0: vec4<f32>;
var<private> acc1: vec4<f32>;
var<private> acc2: vec4<f32>;
var<private> acc3: vec4<f32>;
var<private> acc4: vec4<f32>;
var<private> acc5: vec4<f32>;
var<private> acc6: vec4<f32>;
var<private> acc7: vec4<f32>;

// Accumulator a (tile row tr + 8a), for the stores.
fn acc_row(a: u32) -> vec4<f32> {
    switch a {
        case 0u: {
            return acc0;
        }
        case 1u: {
            return acc1;
        }
        case 2u: {
            return acc2;
        }
        case 3u: {
            return acc3;
        }
        case 4u: {
            return acc4;
        }
        case 5u: {
            return acc5;
        }
        case 6u: {
            return acc6;
        }
        default: {
            return acc7;
        }
    }
}

// s + the four products of one staged vec4 of a row (`av`) with the four columns' (c0..c3).
fn fma_row(
    s: vec4<f32>,
    av: vec4<f32>,
    c0: vec4<f32>,
    c1: vec4<f32>,
    c2: vec4<f32>,
    c3: vec4<f32>,
) -> vec4<f32> {
    var t = fma(vec4<f32>(av.x), c0, s);
    t = fma(vec4<f32>(av.y), c1, t);
    t = fma(vec4<f32>(av.z), c2, t);
    return fma(vec4<f32>(av.w), c3, t);
}
