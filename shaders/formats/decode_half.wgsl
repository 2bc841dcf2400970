// The tiled matmuls' share of a unit: weights 16h .. 16h + 15 of unit `unit` of the block at
// byte `blk` (h = 0, 1: two invocations decode one row's unit), as 4 vec4s, for every format.
// Each format file defines the two steps: `load_half_raw`, its loads into the named fields of
// its `RawHalf`, and `decode_raw`, the arithmetic on them. The tensor-core matmuls take them
// apart, issuing the loads a stage early and decoding after the barrier
// (matmul/coop_stage.wgsl); every other kernel takes both at once here.
fn decode_half(blk: u32, unit: u32, h: u32) -> array<vec4<f32>, 4> {
    return decode_raw(load_half_raw(blk, unit, h), unit, h);
}
