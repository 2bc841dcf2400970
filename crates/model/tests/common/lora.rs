//! LoRA adapters for the tests: random pairs for a model's projections, written as a
//! llama.cpp LoRA GGUF, and the model with the same updates merged into F32 copies of its
//! matrices (the reference an adapter's logits must match).

use rullama_gguf::{GgmlType, GgufFile, GgufWriter};
use rullama_quant::Format;

/// One pair, as `rullama_model::lora::LoraPair` lays it out: `a` is `rank` rows of `n_in`,
/// `b` `n_out` rows of `rank` (synth's generator makes them).
pub use rullama_synth::lora::LoraPair as Pair;

/// The projections of every layer (q, k, v, o, gate, up, down) of `file` for which `keep`
/// holds, with their `(n_in, n_out)`.
pub fn projections(
    file: &GgufFile<Vec<u8>>,
    keep: impl Fn(&str) -> bool,
) -> Vec<(String, usize, usize)> {
    rullama_synth::lora::projections(file, keep)
}

fn dequantized(file: &GgufFile<Vec<u8>>, name: &str) -> Vec<f32> {
    let t = file.tensor(name).unwrap();
    rullama_quant::dequantize_to_vec(Format::Ggml(t.info.ggml_type), t.data).unwrap()
}

/// Random pairs of rank `rank` for `targets`, scaled so that `factor · B·A` has a root mean
/// square of `strength` times its base matrix's (`rullama_synth::lora::random_pairs`).
pub fn random_pairs(
    file: &GgufFile<Vec<u8>>,
    targets: &[(String, usize, usize)],
    rank: usize,
    factor: f32,
    strength: f64,
    seed: u64,
) -> Vec<Pair> {
    rullama_synth::lora::random_pairs(file, targets, rank, factor, strength, seed).unwrap()
}

/// The pairs with their values rounded through `ty_a` / `ty_b` (what a file of those types
/// holds).
pub fn rounded(pairs: &[Pair], ty_a: GgmlType, ty_b: GgmlType) -> Vec<Pair> {
    let round = |ty: GgmlType, v: &[f32]| {
        let bytes = rullama_quant::quantize(Format::Ggml(ty), v).unwrap();
        rullama_quant::dequantize_to_vec(Format::Ggml(ty), &bytes).unwrap()
    };
    pairs
        .iter()
        .map(|p| Pair {
            a: round(ty_a, &p.a),
            b: round(ty_b, &p.b),
            ..p.clone()
        })
        .collect()
}

/// A llama.cpp LoRA GGUF of `pairs` for architecture `arch`: A in `ty_a`, B in `ty_b`.
pub fn adapter_gguf(
    arch: &str,
    alpha: Option<f32>,
    pairs: &[Pair],
    ty_a: GgmlType,
    ty_b: GgmlType,
) -> Vec<u8> {
    rullama_synth::lora::adapter_gguf(arch, alpha, pairs, ty_a, ty_b).unwrap()
}

/// `file` with every pair's `factor · B·A` added to its base matrix, which becomes F32
/// (each `(pairs, factor)` one adapter; the sum taken in f64, rounded once).
pub fn merged(file: &GgufFile<Vec<u8>>, adapters: &[(&[Pair], f32)]) -> GgufFile<Vec<u8>> {
    let mut w = GgufWriter::new();
    *w.metadata_mut() = file.metadata().clone();
    for t in file.tensor_views() {
        let updates: Vec<(&Pair, f32)> = adapters
            .iter()
            .flat_map(|(pairs, f)| {
                pairs
                    .iter()
                    .filter(|p| p.base == t.info.name)
                    .map(|p| (p, *f))
            })
            .collect();
        if updates.is_empty() {
            w.add_tensor(
                t.info.name.clone(),
                &t.info.dims,
                t.info.ggml_type,
                t.data.to_vec(),
            )
            .unwrap();
            continue;
        }
        let mut sum: Vec<f64> = dequantized(file, &t.info.name)
            .iter()
            .map(|&v| f64::from(v))
            .collect();
        for (p, f) in updates {
            let ba = rullama_synth::lora::product(p);
            for (s, d) in sum.iter_mut().zip(ba) {
                *s += f64::from(f) * d;
            }
        }
        let bytes: Vec<u8> = sum.iter().flat_map(|&v| (v as f32).to_le_bytes()).collect();
        w.add_tensor(t.info.name.clone(), &t.info.dims, GgmlType::F32, bytes)
            .unwrap();
    }
    let mut bytes = Vec::new();
    w.write_to(&mut bytes).unwrap();
    GgufFile::from_bytes(bytes).unwrap()
}

/// `file` with every matrix in F32 (its values exactly): a base whose merge is exact to
/// rounding.
pub fn all_f32(file: &GgufFile<Vec<u8>>) -> GgufFile<Vec<u8>> {
    let mut w = GgufWriter::new();
    *w.metadata_mut() = file.metadata().clone();
    for t in file.tensor_views() {
        let values = dequantized(file, &t.info.name);
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        w.add_tensor(t.info.name.clone(), &t.info.dims, GgmlType::F32, bytes)
            .unwrap();
    }
    let mut bytes = Vec::new();
    w.write_to(&mut bytes).unwrap();
    GgufFile::from_bytes(bytes).unwrap()
}
