//! Reading a Hugging Face PEFT LoRA directory (what `PeftModel.save_pretrained` writes):
//! `adapter_config.json` (`r`, `lora_alpha`, `use_rslora`, `target_modules`, `rank_pattern`,
//! `alpha_pattern`) and `adapter_model.safetensors`, whose tensors are named
//! `base_model.model.model.layers.N.self_attn.q_proj.lora_A.weight` (`lora_A` `[r, in]`,
//! `lora_B` `[out, r]`, row-major, F32, F16 or BF16).
//!
//! The pairs become the GGUF names and layouts `convert_lora_to_gguf.py` would write:
//! q_proj → `attn_q`, k_proj → `attn_k`, v_proj → `attn_v`, o_proj → `attn_output`,
//! gate_proj → `ffn_gate`, up_proj → `ffn_up`, down_proj → `ffn_down`; `lora_A` and `lora_B`
//! keep their layout (they are GGML's `[in, r]` and `[r, out]`). For `llama` models
//! `convert_hf_to_gguf.py` permutes the rows of q and k (`LlamaModel.permute`: each head's
//! rows go from rotate-half order to interleaved pairs, for llama.cpp's normal RoPE), so the
//! rows of their `lora_B` are permuted the same way, as the LoRA converter does through its
//! `LoraTorchTensor`; `gemma3` and `qwen2` are converted without a permutation (NeoX RoPE).
//!
//! PEFT's factor of a module is `lora_alpha / r` (`/ sqrt(r)` with `use_rslora`), with `r`
//! and `lora_alpha` taken from `rank_pattern` / `alpha_pattern` where a key names the module
//! (a key matches a module whose name ends with it; PEFT's regular-expression keys are taken
//! literally). The adapter keeps `lora_alpha` as its alpha, and a module whose factor is not
//! `lora_alpha / rank` has the ratio multiplied into its `B`, so the graph applies PEFT's
//! factor exactly (`convert_lora_to_gguf.py` writes `lora_alpha` alone and so ignores rsLoRA
//! and the patterns).
//!
//! [`write()`] (`peft_write.rs`) is the inverse: a [`LoraAdapter`] written as such a directory.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use rullama_gguf::GgmlType;
use rullama_quant::Format;
use safetensors::{Dtype, SafeTensors};
use serde::Deserialize;

pub use super::peft_write::{PeftOptions, write};
use super::{LoraAdapter, LoraError, LoraPair};
use crate::arch::Arch;
use crate::config::ModelConfig;

/// The file holding the tensors.
pub const WEIGHTS_FILE: &str = "adapter_model.safetensors";
/// The file holding the configuration.
pub const CONFIG_FILE: &str = "adapter_config.json";

/// What we read of `adapter_config.json`.
#[derive(Debug, Deserialize)]
struct PeftConfig {
    peft_type: Option<String>,
    r: usize,
    lora_alpha: f32,
    #[serde(default)]
    use_rslora: bool,
    #[serde(default)]
    use_dora: bool,
    #[serde(default)]
    fan_in_fan_out: bool,
    bias: Option<String>,
    #[serde(default)]
    target_modules: Option<serde_json::Value>,
    #[serde(default)]
    rank_pattern: Option<HashMap<String, usize>>,
    #[serde(default)]
    alpha_pattern: Option<HashMap<String, f32>>,
}

/// PEFT module names and the GGUF tensor each updates (`blk.N.<name>.weight`); the first
/// four are attention's (`self_attn`), the rest the MLP's (`mlp`).
pub(super) const MODULES: [(&str, &str); 7] = [
    ("q_proj", "attn_q"),
    ("k_proj", "attn_k"),
    ("v_proj", "attn_v"),
    ("o_proj", "attn_output"),
    ("gate_proj", "ffn_gate"),
    ("up_proj", "ffn_up"),
    ("down_proj", "ffn_down"),
];

/// Whether `dir` looks like a PEFT adapter directory (it holds `adapter_config.json`).
pub fn is_peft_dir(dir: &Path) -> bool {
    dir.is_dir() && dir.join(CONFIG_FILE).is_file()
}

pub(super) fn read(dir: &Path, cfg: &ModelConfig) -> Result<LoraAdapter, LoraError> {
    let config_path = dir.join(CONFIG_FILE);
    let weights_path = dir.join(WEIGHTS_FILE);
    let config_file = config_path.display().to_string();
    let file = weights_path.display().to_string();
    let io = |file: &String| {
        let file = file.clone();
        move |source| LoraError::Io { file, source }
    };
    let invalid = |file: &String, what: String| LoraError::Invalid {
        file: file.clone(),
        what,
    };

    let text = std::fs::read_to_string(&config_path).map_err(io(&config_file))?;
    let config: PeftConfig =
        serde_json::from_str(&text).map_err(|e| invalid(&config_file, e.to_string()))?;
    check_config(&config, &config_file)?;

    let bytes = std::fs::read(&weights_path).map_err(io(&file))?;
    let tensors = SafeTensors::deserialize(&bytes)
        .map_err(|e| invalid(&file, format!("safetensors: {e}")))?;

    // The halves of each pair, by GGUF base name, with the PEFT module name (for patterns).
    let mut halves: BTreeMap<String, (String, [Option<safetensors::tensor::TensorView<'_>>; 2])> =
        BTreeMap::new();
    for (name, view) in tensors.tensors() {
        let Some((module_path, base, half)) = gguf_name(&name) else {
            return Err(LoraError::UnsupportedTensor {
                file: file.clone(),
                tensor: name.clone(),
                why: "not the lora_A or lora_B of a layer's q, k, v, o, gate, up or down \
                      projection"
                    .into(),
            });
        };
        halves
            .entry(base)
            .or_insert_with(|| (module_path, [None, None]))
            .1[half] = Some(view);
    }

    let mut pairs = Vec::with_capacity(halves.len());
    for (base, (module, [a, b])) in halves {
        let (a, b) = match (a, b) {
            (Some(a), Some(b)) => (a, b),
            (a, _) => {
                let (present, missing) = if a.is_some() {
                    ("lora_A", "lora_B")
                } else {
                    ("lora_B", "lora_A")
                };
                return Err(LoraError::MissingHalf {
                    file: file.clone(),
                    base,
                    present,
                    missing,
                });
            }
        };
        let shape_err = |half: &str, expected: Vec<u64>, found: &[usize]| LoraError::Shape {
            file: file.clone(),
            tensor: format!("{module}.{half}.weight"),
            expected,
            found: found.iter().map(|&d| d as u64).collect(),
        };
        let (&[rank, n_in], &[n_out, rank_b]) = (a.shape(), b.shape()) else {
            return Err(shape_err("lora_A/lora_B", vec![0, 0], a.shape()));
        };
        let r_module = pattern(&config.rank_pattern, &module).unwrap_or(config.r);
        if rank != r_module {
            return Err(shape_err(
                "lora_A",
                vec![r_module as u64, n_in as u64],
                a.shape(),
            ));
        }
        if rank_b != rank {
            return Err(shape_err(
                "lora_B",
                vec![n_out as u64, rank as u64],
                b.shape(),
            ));
        }
        let mut b_values = values(&b, &file, &module)?;
        if cfg.arch == Arch::Llama {
            let heads = match base.rsplit('.').nth(1) {
                Some("attn_q") => Some(cfg.n_head),
                Some("attn_k") => Some(cfg.n_head_kv),
                _ => None,
            };
            if let Some(n_head) = heads {
                if n_head == 0 || !n_out.is_multiple_of(2 * n_head) {
                    return Err(shape_err(
                        "lora_B",
                        vec![(n_head * cfg.head_dim_k) as u64, rank as u64],
                        b.shape(),
                    ));
                }
                b_values = permute_rows(&b_values, n_head, n_out / n_head, rank);
            }
        }
        // PEFT's factor against the one the graph applies (`alpha / rank`).
        let alpha = pattern(&config.alpha_pattern, &module).unwrap_or(config.lora_alpha);
        let peft = if config.use_rslora {
            alpha / (rank as f32).sqrt()
        } else {
            alpha / rank as f32
        };
        let applied = if config.lora_alpha == 0.0 {
            1.0
        } else {
            config.lora_alpha / rank as f32
        };
        if peft != applied {
            let ratio = peft / applied;
            b_values.iter_mut().for_each(|v| *v *= ratio);
        }
        pairs.push(LoraPair {
            base,
            n_in,
            n_out,
            rank,
            a: values(&a, &file, &module)?,
            b: b_values,
        });
    }
    LoraAdapter::from_pairs(&file, cfg.arch.name(), config.lora_alpha, pairs)
}

/// The settings this reader cannot apply, refused by name.
fn check_config(c: &PeftConfig, file: &str) -> Result<(), LoraError> {
    let refuse = |what: &str| {
        Err(LoraError::Invalid {
            file: file.to_string(),
            what: what.to_string(),
        })
    };
    if let Some(t) = c.peft_type.as_deref()
        && t != "LORA"
    {
        return refuse(&format!("peft_type is {t}, not LORA"));
    }
    if c.r == 0 {
        return refuse("r is 0");
    }
    if !c.lora_alpha.is_finite() {
        return refuse("lora_alpha is not a finite number");
    }
    if c.use_dora {
        return refuse("use_dora (DoRA) is not supported");
    }
    if c.fan_in_fan_out {
        return refuse("fan_in_fan_out (GPT-2's Conv1D layout) is not supported");
    }
    if let Some(bias) = c.bias.as_deref()
        && bias != "none"
    {
        return refuse(&format!("bias `{bias}` (trained biases) is not supported"));
    }
    if let Some(serde_json::Value::Array(targets)) = &c.target_modules {
        for t in targets {
            // A module's name, or its path (`layers.0.self_attn.q_proj`, which PEFT matches
            // against the end of the model's module names): its last part names the kind.
            let name = t.as_str().unwrap_or_default();
            let kind = name.rsplit('.').next().unwrap_or_default();
            if !MODULES.iter().any(|(m, _)| *m == kind) {
                return refuse(&format!(
                    "target module `{name}` is not one of q_proj, k_proj, v_proj, o_proj, \
                     gate_proj, up_proj, down_proj"
                ));
            }
        }
    }
    Ok(())
}

/// A PEFT tensor name as (the module's path, the GGUF base tensor, 0 for `lora_A` / 1 for
/// `lora_B`): `base_model.model.` then `model.`, `language_model.` (Gemma 3's multimodal
/// files) in any order, then `layers.N.(self_attn|mlp).<module>.lora_(A|B).weight`.
fn gguf_name(name: &str) -> Option<(String, String, usize)> {
    let mut rest = name.strip_prefix("base_model.model.").unwrap_or(name);
    while let Some(r) = rest
        .strip_prefix("model.")
        .or_else(|| rest.strip_prefix("language_model."))
    {
        rest = r;
    }
    let (module_path, half) = if let Some(m) = rest.strip_suffix(".lora_A.weight") {
        (m, 0)
    } else {
        (rest.strip_suffix(".lora_B.weight")?, 1)
    };
    let mut parts = module_path.split('.');
    let (Some("layers"), Some(il), Some(block), Some(module), None) = (
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
    ) else {
        return None;
    };
    let il: usize = il.parse().ok()?;
    let at = MODULES.iter().position(|(m, _)| *m == module)?;
    let gguf = MODULES[at].1;
    // The first four are attention's, the rest the MLP's.
    let expected_block = if at < 4 { "self_attn" } else { "mlp" };
    if block != expected_block {
        return None;
    }
    Some((
        module_path.to_string(),
        format!("blk.{il}.{gguf}.weight"),
        half,
    ))
}

/// The value of the pattern key that names `module` (the whole path, or its end after a
/// dot), if any.
fn pattern<T: Copy>(patterns: &Option<HashMap<String, T>>, module: &str) -> Option<T> {
    patterns.as_ref()?.iter().find_map(|(key, v)| {
        let hit = module == key
            || module
                .strip_suffix(key.as_str())
                .is_some_and(|head| head.ends_with('.'));
        hit.then_some(*v)
    })
}

/// A tensor's values in f32.
fn values(
    view: &safetensors::tensor::TensorView<'_>,
    file: &str,
    module: &str,
) -> Result<Vec<f32>, LoraError> {
    let ty = match view.dtype() {
        Dtype::F32 => GgmlType::F32,
        Dtype::F16 => GgmlType::F16,
        Dtype::BF16 => GgmlType::Bf16,
        other => {
            return Err(LoraError::UnsupportedTensor {
                file: file.to_string(),
                tensor: module.to_string(),
                why: format!("dtype {other:?} (F32, F16 and BF16 are read)"),
            });
        }
    };
    let n: usize = view.shape().iter().product();
    let mut out = vec![0f32; n];
    rullama_quant::dequantize(Format::Ggml(ty), view.data(), &mut out).map_err(|source| {
        LoraError::Weight {
            file: file.to_string(),
            tensor: module.to_string(),
            source,
        }
    })?;
    Ok(out)
}

/// `convert_hf_to_gguf.py`'s `LlamaModel.permute` of the rows of `b` (`n_head` heads of
/// `head_dim` rows, `cols` values each): `reshape(n_head, 2, head_dim / 2, cols)
/// .swapaxes(1, 2)`, so row `2j + t` of a head is row `t * head_dim / 2 + j` before.
pub(crate) fn permute_rows(b: &[f32], n_head: usize, head_dim: usize, cols: usize) -> Vec<f32> {
    let half = head_dim / 2;
    let mut out = vec![0f32; b.len()];
    for h in 0..n_head {
        for j in 0..half {
            for t in 0..2 {
                let new = h * head_dim + 2 * j + t;
                let old = h * head_dim + t * half + j;
                out[new * cols..(new + 1) * cols].copy_from_slice(&b[old * cols..(old + 1) * cols]);
            }
        }
    }
    out
}

/// The inverse of [`permute_rows`]: each head's interleaved pairs back to rotate-half
/// halves, so row `t * head_dim / 2 + j` of a head is row `2j + t` before: a `lora_B` in
/// llama.cpp's row order put back in the Hugging Face model's, for the PEFT writer.
pub(crate) fn unpermute_rows(b: &[f32], n_head: usize, head_dim: usize, cols: usize) -> Vec<f32> {
    let half = head_dim / 2;
    let mut out = vec![0f32; b.len()];
    for h in 0..n_head {
        for j in 0..half {
            for t in 0..2 {
                let hf = h * head_dim + t * half + j;
                let gguf = h * head_dim + 2 * j + t;
                out[hf * cols..(hf + 1) * cols].copy_from_slice(&b[gguf * cols..(gguf + 1) * cols]);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peft_names_map_to_gguf_tensors() {
        let m = |n: &str| gguf_name(n).map(|(_, base, half)| (base, half));
        assert_eq!(
            m("base_model.model.model.layers.3.self_attn.q_proj.lora_A.weight"),
            Some(("blk.3.attn_q.weight".into(), 0))
        );
        assert_eq!(
            m("base_model.model.model.language_model.layers.0.mlp.down_proj.lora_B.weight"),
            Some(("blk.0.ffn_down.weight".into(), 1))
        );
        assert_eq!(m("base_model.model.lm_head.lora_A.weight"), None);
        assert_eq!(
            m("base_model.model.model.layers.0.mlp.q_proj.lora_A.weight"),
            None
        );
        assert_eq!(
            m("base_model.model.model.embed_tokens.lora_embedding_A"),
            None
        );
        assert_eq!(
            m("base_model.model.model.layers.x.mlp.up_proj.lora_A.weight"),
            None
        );
    }

    /// Two heads of 4 rows: each head's rows 0, 1 | 2, 3 (rotate-half halves) interleave.
    #[test]
    fn llama_permutation_interleaves_each_heads_halves() {
        let b: Vec<f32> = (0..8).map(|i| i as f32).collect();
        assert_eq!(
            permute_rows(&b, 2, 4, 1),
            [0.0, 2.0, 1.0, 3.0, 4.0, 6.0, 5.0, 7.0]
        );
        assert_eq!(unpermute_rows(&permute_rows(&b, 2, 4, 1), 2, 4, 1), b);
    }

    #[test]
    fn patterns_match_the_module_or_its_end() {
        let p = Some(HashMap::from([("q_proj".to_string(), 8usize)]));
        assert_eq!(pattern(&p, "layers.0.self_attn.q_proj"), Some(8));
        assert_eq!(pattern(&p, "layers.0.self_attn.xq_proj"), None);
        assert_eq!(pattern(&p, "q_proj"), Some(8));
    }
}
