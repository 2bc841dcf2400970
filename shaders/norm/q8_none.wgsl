// residual_norm without a q8 output: y is written as f32 only.

fn store_q8(t: u32, tid: u32, v: Tile) {}
