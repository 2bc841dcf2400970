// KV cache in f16: one pair of values per u32 word (pack2x16float: no SHADER_F16 needed).

@group(0) @binding(4) var<storage, read_write> kc: array<u32>;
@group(0) @binding(5) var<storage, read_write> vc: array<u32>;

fn store_k(i: u32, x: vec2<f32>) {
    kc[i] = pack2x16float(x);
}

fn store_v(i: u32, x: vec2<f32>) {
    vc[i] = pack2x16float(x);
}
