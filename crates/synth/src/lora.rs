//! Random LoRA adapters for a model: rank-r pairs for its projections, written as a llama.cpp
//! LoRA GGUF (`general.type = adapter`, `adapter.type = lora`, `<base>.lora_a` [n_in, r] and
//! `<base>.lora_b` [r, n_out] in GGML's dims), so an adapter can be tried in two engines
//! before any training exists (`cargo xtask synth --lora-for`), and tests have one to apply.

use rullama_gguf::{GgmlType, GgufFile, GgufWriter};
use rullama_quant::Format;

use crate::error::Result;
use crate::weights::SplitMix64;

/// The projections a LoRA adapter may target, by their GGUF tensor names' suffix.
pub const PROJECTIONS: [&str; 7] = [
    "attn_q.weight",
    "attn_k.weight",
    "attn_v.weight",
    "attn_output.weight",
    "ffn_gate.weight",
    "ffn_up.weight",
    "ffn_down.weight",
];

/// One adapter pair: `a` is `rank` rows of `n_in`, `b` is `n_out` rows of `rank` (row-major),
/// and the update of the base matrix `base` is `scale · B·A`.
#[derive(Debug, Clone)]
pub struct LoraPair {
    /// The base tensor's name (`blk.0.attn_q.weight`).
    pub base: String,
    /// The base's inputs (columns).
    pub n_in: usize,
    /// The base's outputs (rows).
    pub n_out: usize,
    /// The rank.
    pub rank: usize,
    /// A, `rank x n_in`.
    pub a: Vec<f32>,
    /// B, `n_out x rank`.
    pub b: Vec<f32>,
}

/// The projections of every layer of `file` (see [`PROJECTIONS`]) for which `keep` holds, with
/// their `(n_in, n_out)`.
pub fn projections<B: AsRef<[u8]>>(
    file: &GgufFile<B>,
    keep: impl Fn(&str) -> bool,
) -> Vec<(String, usize, usize)> {
    file.tensors()
        .filter(|t| t.name.starts_with("blk.") && PROJECTIONS.iter().any(|s| t.name.ends_with(s)))
        .filter(|t| keep(&t.name))
        .map(|t| (t.name.clone(), t.dims[0] as usize, t.dims[1] as usize))
        .collect()
}

/// Uniform values in `[-1, 1)`.
fn uniform(n: usize, seed: u64) -> Vec<f32> {
    let mut rng = SplitMix64::new(seed);
    (0..n)
        .map(|_| ((rng.next_u64() >> 40) as f32 / (1u64 << 23) as f32) - 1.0)
        .collect()
}

/// The root mean square of tensor `name`'s values.
fn rms<B: AsRef<[u8]>>(file: &GgufFile<B>, name: &str) -> Result<f64> {
    let t = file
        .tensor(name)
        .ok_or_else(|| crate::SynthError::NoTensor(name.to_string()))?;
    let w = rullama_quant::dequantize_to_vec(Format::Ggml(t.info.ggml_type), t.data)?;
    Ok((w.iter().map(|&v| f64::from(v).powi(2)).sum::<f64>() / w.len().max(1) as f64).sqrt())
}

/// `B·A` (`n_out` rows of `n_in`) in f64.
pub fn product(p: &LoraPair) -> Vec<f64> {
    let mut out = vec![0f64; p.n_out * p.n_in];
    for o in 0..p.n_out {
        for k in 0..p.rank {
            let bk = f64::from(p.b[o * p.rank + k]);
            let row = &p.a[k * p.n_in..(k + 1) * p.n_in];
            for (d, &a) in out[o * p.n_in..(o + 1) * p.n_in].iter_mut().zip(row) {
                *d += bk * f64::from(a);
            }
        }
    }
    out
}

/// Random pairs of rank `rank` for `targets` (from [`projections`]), B scaled so that
/// `factor · B·A` has a root mean square of `strength` times its base matrix's: an update
/// that moves the logits well past rounding without swamping the model.
pub fn random_pairs<B: AsRef<[u8]>>(
    file: &GgufFile<B>,
    targets: &[(String, usize, usize)],
    rank: usize,
    factor: f32,
    strength: f64,
    seed: u64,
) -> Result<Vec<LoraPair>> {
    targets
        .iter()
        .enumerate()
        .map(|(i, (base, n_in, n_out))| {
            let s = seed.wrapping_mul(1000).wrapping_add(2 * i as u64);
            let mut p = LoraPair {
                base: base.clone(),
                n_in: *n_in,
                n_out: *n_out,
                rank,
                a: uniform(rank * n_in, s),
                b: uniform(n_out * rank, s + 1),
            };
            let ba = product(&p);
            let ba_rms = (ba.iter().map(|v| v * v).sum::<f64>() / ba.len().max(1) as f64).sqrt();
            let k = (strength * rms(file, base)? / (ba_rms * f64::from(factor).abs())) as f32;
            p.b.iter_mut().for_each(|v| *v *= k);
            Ok(p)
        })
        .collect()
}

/// A llama.cpp LoRA GGUF of `pairs` for architecture `arch`: A in `ty_a`, B in `ty_b`, with
/// `adapter.lora.alpha` where `alpha` is given.
pub fn adapter_gguf(
    arch: &str,
    alpha: Option<f32>,
    pairs: &[LoraPair],
    ty_a: GgmlType,
    ty_b: GgmlType,
) -> Result<Vec<u8>> {
    let mut w = GgufWriter::new();
    w.set("general.architecture", arch);
    w.set("general.type", "adapter");
    w.set("adapter.type", "lora");
    if let Some(alpha) = alpha {
        w.set("adapter.lora.alpha", alpha);
    }
    for p in pairs {
        let a = rullama_quant::quantize(Format::Ggml(ty_a), &p.a)?;
        let b = rullama_quant::quantize(Format::Ggml(ty_b), &p.b)?;
        let (n_in, n_out, r) = (p.n_in as u64, p.n_out as u64, p.rank as u64);
        w.add_tensor(format!("{}.lora_a", p.base), &[n_in, r], ty_a, a)?;
        w.add_tensor(format!("{}.lora_b", p.base), &[r, n_out], ty_b, b)?;
    }
    let mut bytes = Vec::new();
    w.write_to(&mut bytes)?;
    Ok(bytes)
}
