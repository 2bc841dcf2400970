//! LoRA adapters for the tests: random pairs for a model's projections, written as a
//! llama.cpp LoRA GGUF, and the model with the same updates merged into F32 copies of its
//! matrices (the reference an adapter's logits must match).

use rullama_gguf::{GgmlType, GgufFile, GgufWriter};
use rullama_quant::Format;

/// One pair, as `rullama_model::lora::LoraPair` lays it out: `a` is `rank` rows of `n_in`,
/// `b` `n_out` rows of `rank`.
#[derive(Debug, Clone)]
pub struct Pair {
    pub base: String,
    pub n_in: usize,
    pub n_out: usize,
    pub rank: usize,
    pub a: Vec<f32>,
    pub b: Vec<f32>,
}

/// The projections of every layer (q, k, v, o, gate, up, down) of `file` for which `keep`
/// holds, with their `(n_in, n_out)`.
pub fn projections(
    file: &GgufFile<Vec<u8>>,
    keep: impl Fn(&str) -> bool,
) -> Vec<(String, usize, usize)> {
    const SUFFIXES: [&str; 7] = [
        "attn_q.weight",
        "attn_k.weight",
        "attn_v.weight",
        "attn_output.weight",
        "ffn_gate.weight",
        "ffn_up.weight",
        "ffn_down.weight",
    ];
    file.tensors()
        .filter(|t| t.name.starts_with("blk.") && SUFFIXES.iter().any(|s| t.name.ends_with(s)))
        .filter(|t| keep(&t.name))
        .map(|t| (t.name.clone(), t.dims[0] as usize, t.dims[1] as usize))
        .collect()
}

/// The root mean square of a tensor's values.
fn rms(file: &GgufFile<Vec<u8>>, name: &str) -> f64 {
    let w = dequantized(file, name);
    (w.iter().map(|&v| f64::from(v).powi(2)).sum::<f64>() / w.len() as f64).sqrt()
}

fn dequantized(file: &GgufFile<Vec<u8>>, name: &str) -> Vec<f32> {
    let t = file.tensor(name).unwrap();
    rullama_quant::dequantize_to_vec(Format::Ggml(t.info.ggml_type), t.data).unwrap()
}

/// Random pairs of rank `rank` for `targets`, scaled so that `factor · B·A` has a root mean
/// square of `strength` times its base matrix's: an update that moves the logits well past
/// rounding, without swamping the model.
pub fn random_pairs(
    file: &GgufFile<Vec<u8>>,
    targets: &[(String, usize, usize)],
    rank: usize,
    factor: f32,
    strength: f64,
    seed: u64,
) -> Vec<Pair> {
    targets
        .iter()
        .enumerate()
        .map(|(i, (base, n_in, n_out))| {
            let (n_in, n_out) = (*n_in, *n_out);
            let s = seed.wrapping_mul(1000).wrapping_add(2 * i as u64);
            let a = floats(super::random_f32_bytes(rank * n_in, 1.0, s));
            let b = floats(super::random_f32_bytes(n_out * rank, 1.0, s + 1));
            let ba = product(&a, &b, rank, n_in, n_out);
            let ba_rms = (ba.iter().map(|v| v * v).sum::<f64>() / ba.len() as f64).sqrt();
            let k = (strength * rms(file, base) / (ba_rms * f64::from(factor).abs())) as f32;
            Pair {
                base: base.clone(),
                n_in,
                n_out,
                rank,
                a,
                b: b.iter().map(|v| v * k).collect(),
            }
        })
        .collect()
}

fn floats(bytes: Vec<u8>) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

/// `B·A` (`n_out` rows of `n_in`) in f64.
fn product(a: &[f32], b: &[f32], rank: usize, n_in: usize, n_out: usize) -> Vec<f64> {
    let mut out = vec![0f64; n_out * n_in];
    for o in 0..n_out {
        for k in 0..rank {
            let bk = f64::from(b[o * rank + k]);
            for i in 0..n_in {
                out[o * n_in + i] += bk * f64::from(a[k * n_in + i]);
            }
        }
    }
    out
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
    let mut w = GgufWriter::new();
    w.set("general.architecture", arch);
    w.set("general.type", "adapter");
    w.set("adapter.type", "lora");
    if let Some(alpha) = alpha {
        w.set("adapter.lora.alpha", alpha);
    }
    for p in pairs {
        let a = rullama_quant::quantize(Format::Ggml(ty_a), &p.a).unwrap();
        let b = rullama_quant::quantize(Format::Ggml(ty_b), &p.b).unwrap();
        let (n_in, n_out, r) = (p.n_in as u64, p.n_out as u64, p.rank as u64);
        w.add_tensor(format!("{}.lora_a", p.base), &[n_in, r], ty_a, a)
            .unwrap();
        w.add_tensor(format!("{}.lora_b", p.base), &[r, n_out], ty_b, b)
            .unwrap();
    }
    let mut bytes = Vec::new();
    w.write_to(&mut bytes).unwrap();
    bytes
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
            let ba = product(&p.a, &p.b, p.rank, p.n_in, p.n_out);
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
