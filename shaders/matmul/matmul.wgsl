// Y[t, r] = sum_i X[t, i] * W[r, i] for a block of tokens (prefill): the rows r of one weight
// chunk, in GGUF's block layout, decoded by the format file's `decode_unit` (32 weights).
// Workgroup (row tile, token tile) of 256 invocations computes 64 rows x 32 tokens: per unit
// of 32 inputs, 64 invocations decode one row's unit each into workgroup memory, all 256 load
// the 32 x 32 slice of X, then each invocation accumulates 4 rows x 2 tokens from workgroup
// memory, so a decoded weight is used by 32 tokens and an X value by 64 rows.
// X row t starts at x_offset + t * x_stride; Y[t, r] is y[y_offset + t * y_stride + r].

struct Params {
    n_in: u32,
    n_rows: u32,
    row_bytes: u32,
    n_tokens: u32,
    x_offset: u32,
    x_stride: u32,
    y_offset: u32,
    y_stride: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> w: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
// The weight chunk once more, as words, for the scalar reads of common/blocks.wgsl (a vec4
// load there would fetch 16 bytes to use 4).
@group(0) @binding(4) var<storage, read> w_words: array<u32>;

// Must be 256 (16 x 16 invocations over 64 rows x 32 tokens).
override WG: u32 = 256u;
const TM: u32 = 64u;
const TN: u32 = 32u;
// Row stride of the tiles: 33 keeps neighbouring rows in different banks.
const S: u32 = 33u;

var<workgroup> ws: array<f32, 2112>;
var<workgroup> xs: array<f32, 1056>;

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(local_invocation_index) tid: u32,
) {
    let row0 = wid.x * TM;
    let tok0 = wid.y * TN;
    let tr = tid % 16u;
    let tt = tid / 16u;
    var acc: array<vec2<f32>, 4>;
    for (var r = 0u; r < 4u; r++) {
        acc[r] = vec2<f32>(0.0);
    }
    let units = (p.n_in + 31u) / 32u;
    for (var u = 0u; u < units; u++) {
        let valid = min(32u, p.n_in - 32u * u);
        if tid < TM {
            let row = row0 + tid;
            if row < p.n_rows {
                decode_unit(row * p.row_bytes + (u / BLOCK_UNITS) * BLOCK_BYTES, u % BLOCK_UNITS);
                for (var j = 0u; j < 32u; j++) {
                    ws[tid * S + j] = select(0.0, unit_w[j], j < valid);
                }
            } else {
                for (var j = 0u; j < 32u; j++) {
                    ws[tid * S + j] = 0.0;
                }
            }
        }
        for (var k = 0u; k < 4u; k++) {
            let idx = tid + WG * k;
            let t = idx / 32u;
            let j = idx % 32u;
            var v = 0.0;
            if tok0 + t < p.n_tokens && j < valid {
                v = x[p.x_offset + (tok0 + t) * p.x_stride + 32u * u + j];
            }
            xs[t * S + j] = v;
        }
        workgroupBarrier();
        for (var j = 0u; j < 32u; j++) {
            let xv = vec2<f32>(xs[(2u * tt) * S + j], xs[(2u * tt + 1u) * S + j]);
            for (var r = 0u; r < 4u; r++) {
                acc[r] += ws[(4u * tr + r) * S + j] * xv;
            }
        }
        workgroupBarrier();
    }
    for (var r = 0u; r < 4u; r++) {
        let row = row0 + 4u * tr + r;
        for (var c = 0u; c < 2u; c++) {
            let t = tok0 + 2u * tt + c;
            if row < p.n_rows && t < p.n_tokens {
                y[p.y_offset + t * p.y_stride + row] = acc[r][c];
            }
        }
    }
}
