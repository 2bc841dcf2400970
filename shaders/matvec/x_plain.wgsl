// Matvec input: a vector x at x_offset. `x4(i)` returns x[i .. i + 4], zero past n_in.

// x as vec4s (activation buffers are padded to 16 bytes): a part's 4 inputs in one load when
// x_offset is a multiple of 4 (always, for rows of whole 32-weight units at a row boundary).
@group(0) @binding(2) var<storage, read> x: array<vec4<f32>>;

// End of x (exclusive) for `x4`: a partial last unit of an F32/F16 row reads zeros past it.
var<private> x_end: u32;
// x_offset % 4 == 0: every x4(i) the parts ask for is then vec4-aligned.
var<private> x_aligned: bool;
// Whether a row may end inside a unit of 32 (F32/F16/BF16 rows of any length): set from Rust
// (`matvec::whole_block_rows`), which refuses block-format inputs that do not start at a
// multiple of 4 floats (`check_vec4_start`), so their reads need no check.
override PARTIAL_UNITS: bool = true;

fn x_begin(row0: u32, tid: u32) {
    x_end = p.x_offset + p.n_in;
    x_aligned = (p.x_offset & 3u) == 0u;
}

fn x1(i: u32) -> f32 {
    let j = min(i, x_end - 1u);
    return select(0.0, x[j >> 2u][j & 3u], i < x_end);
}

// x[i .. i + 4], zero past n_in.
fn x4(i: u32) -> vec4<f32> {
    // Rows of whole blocks never read past the row and start at a multiple of 4: no check,
    // which lets the loads issue back to back (docs/PERF.md, D-whole-block-reads).
    if !PARTIAL_UNITS || (x_aligned && i + 3u < x_end) {
        return x[i >> 2u];
    }
    return vec4<f32>(x1(i), x1(i + 1u), x1(i + 2u), x1(i + 3u));
}

// The factor of the row totals: none.
fn x_scale(tid: u32) -> f32 {
    return 1.0;
}
