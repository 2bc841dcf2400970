// The split part of the weight kernels' parameters (`SplitParams` in ops/split.rs; zero in the
// one-output variant), a field `split` of each kernel's Params: dispatch row r reads chunk row
// row_base + r and goes to output j = (r >= end0) + (r >= end1), element
// y_offsets[j] + t * y_strides[j] + r (common/out_split.wgsl); the GLU epilogue reads its rows
// through row_base and end0 as well (matvec/out_glu.wgsl).
struct SplitParams {
    row_base: u32,
    end0: u32,
    end1: u32,
    _pad: u32,
    y_offsets: vec4<u32>,
    y_strides: vec4<u32>,
}
