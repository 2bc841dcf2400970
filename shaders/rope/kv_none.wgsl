// head_norm_rope without a KV cache: the finished k heads stay in their own buffer only.

fn keep(d: vec2<u32>, y: vec2<f32>) {}

fn cache_head(t: u32, h: u32, tid: u32) {}
