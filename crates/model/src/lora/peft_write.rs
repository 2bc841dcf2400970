//! Writing a Hugging Face PEFT LoRA directory, the inverse of [`super::peft`]'s reader:
//! `adapter_model.safetensors` (written with the `safetensors` crate, F32, PEFT's names and
//! layouts) and `adapter_config.json` (the keys `PeftModel.from_pretrained` reads, sorted
//! and indented as `PeftConfig.save_pretrained` writes them).
//!
//! The pairs are in llama.cpp's names and row order; each goes back to its module
//! (`blk.N.attn_q.weight` → `layers.N.self_attn.q_proj`, …) and, for `llama` models, the
//! rows of q's and k's `lora_B` go back from llama.cpp's interleaved pairs to the Hugging
//! Face model's rotate-half halves (the reader's permutation, inverted), so the adapter
//! applies to the Hugging Face weights the GGUF was converted from.
//!
//! `A` and `B` are written as they are and `lora_alpha` is [`LoraAdapter::alpha`], so PEFT
//! multiplies `B·A` by `alpha / r`, the factor the graph applies, or by `alpha / sqrt(r)`
//! when [`PeftOptions::use_rslora`] says the pairs were trained with rsLoRA's factor.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::Write as _;
use std::path::Path;

use safetensors::Dtype;
use safetensors::tensor::TensorView;
use serde::Serialize;

use super::peft::{CONFIG_FILE, MODULES, WEIGHTS_FILE, unpermute_rows};
use super::{LoraAdapter, LoraError, LoraPair};
use crate::arch::Arch;
use crate::config::ModelConfig;

/// What [`write()`] records beside the adapter itself.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PeftOptions {
    /// `base_model_name_or_path`: the Hugging Face model (a hub id or a path) the adapter
    /// is for, which `AutoPeftModelForCausalLM` loads; `null` when `None`.
    pub base_model_name_or_path: Option<String>,
    /// `revision`: the base model's revision on the hub; `null` when `None`.
    pub revision: Option<String>,
    /// `use_rslora`: the pairs were trained with rsLoRA's factor `alpha / sqrt(r)`, and PEFT
    /// is to apply that factor to them. The adapter's alpha is written as `lora_alpha`
    /// unchanged either way. An adapter read back with [`LoraAdapter::open_peft`] then has
    /// `sqrt(r)` multiplied into its `B`, since the graph's factor is `alpha / r`.
    pub use_rslora: bool,
    /// `lora_dropout` the adapter was trained with (PEFT ignores it at inference); in
    /// `[0, 1)`.
    pub lora_dropout: f32,
}

/// `adapter_config.json`: the fields in the sorted order `PeftConfig.save_pretrained`
/// writes them (`sort_keys=True`), the LoRA ones PEFT has long had, so that older PEFT
/// versions load it without an "unexpected keyword arguments" warning.
#[derive(Serialize)]
struct ConfigJson<'a> {
    alpha_pattern: BTreeMap<String, Number>,
    base_model_name_or_path: Option<&'a str>,
    bias: &'static str,
    fan_in_fan_out: bool,
    inference_mode: bool,
    init_lora_weights: bool,
    lora_alpha: Number,
    lora_dropout: f32,
    modules_to_save: Option<Vec<String>>,
    peft_type: &'static str,
    r: usize,
    rank_pattern: BTreeMap<String, usize>,
    revision: Option<&'a str>,
    target_modules: Vec<String>,
    task_type: &'static str,
    use_rslora: bool,
}

/// An alpha as PEFT writes it: an integer where it is one (`lora_alpha: int`), else the
/// shortest decimal of the f32, which the reader parses back to the same f32.
#[derive(Serialize)]
#[serde(untagged)]
enum Number {
    Int(i64),
    Float(f32),
}

impl Number {
    fn of(v: f32) -> Number {
        if v.fract() == 0.0 && v.abs() < (1u64 << 53) as f32 {
            Number::Int(v as i64)
        } else {
            Number::Float(v)
        }
    }
}

/// Writes `adapter` as the PEFT LoRA directory `dir` (created if missing, with its parents)
/// for the Hugging Face model that `cfg`'s GGUF was converted from. Both files are written
/// whole or not at all: into a new directory made beside `dir` and renamed to it, or, where
/// `dir` exists, each into a temporary file beside its name and renamed over it, the config
/// last (it is what marks a PEFT directory). Other files in an existing `dir` are left as
/// they are.
///
/// `r` is the rank most pairs have; a pair of another rank gets a `rank_pattern` entry
/// naming its module (`layers.N.self_attn.q_proj`). An adapter without alpha (0:
/// llama.cpp's factor 1) is written with `lora_alpha` equal to each module's rank
/// (`alpha_pattern` where it differs), so PEFT's factor is 1 too; it is refused with
/// `use_rslora`, whose factor needs an alpha.
///
/// Errors: an adapter of another architecture than `cfg`'s ([`LoraError::Architecture`]),
/// a pair of a tensor that is not a layer's q, k, v, o, gate, up or down projection
/// ([`LoraError::UnsupportedTensor`]) or of a layer the model does not have
/// ([`LoraError::UnknownTensor`]), a llama q/k `B` whose rows are not whole heads
/// ([`LoraError::Shape`]), two pairs for one tensor or a bad option
/// ([`LoraError::Invalid`]), `dir` existing as something else than a directory
/// ([`LoraError::NotADirectory`]), and what the file system says ([`LoraError::Write`]).
pub fn write(
    dir: &Path,
    adapter: &LoraAdapter,
    cfg: &ModelConfig,
    options: &PeftOptions,
) -> Result<(), LoraError> {
    let label = dir.display().to_string();
    let invalid = |what: String| LoraError::Invalid {
        file: label.clone(),
        what,
    };
    if adapter.arch() != cfg.arch.name() {
        return Err(LoraError::Architecture {
            file: adapter.file().to_string(),
            adapter: adapter.arch().to_string(),
            model: cfg.arch.name().to_string(),
        });
    }
    if !(options.lora_dropout.is_finite() && (0.0..1.0).contains(&options.lora_dropout)) {
        return Err(invalid(format!(
            "lora_dropout {} is not in [0, 1)",
            options.lora_dropout
        )));
    }
    let alpha = adapter.alpha();
    if alpha == 0.0 && options.use_rslora {
        return Err(invalid(
            "use_rslora with an adapter without alpha (its factor is 1, not alpha / sqrt(r))"
                .into(),
        ));
    }

    let mut modules = Vec::with_capacity(adapter.pairs().len());
    let mut seen = BTreeSet::new();
    for p in adapter.pairs() {
        if !seen.insert(p.base.as_str()) {
            return Err(invalid(format!("two pairs for `{}`", p.base)));
        }
        let Some(m) = peft_module(&p.base) else {
            return Err(LoraError::UnsupportedTensor {
                file: adapter.file().to_string(),
                tensor: p.base.clone(),
                why: "PEFT's names are written for the q, k, v, o, gate, up and down \
                      projections of the layers only"
                    .into(),
            });
        };
        if m.layer >= cfg.n_layer {
            return Err(LoraError::UnknownTensor {
                file: adapter.file().to_string(),
                base: p.base.clone(),
            });
        }
        modules.push(m);
    }

    // `r`: the most common rank, the smaller on a tie.
    let mut counts = BTreeMap::new();
    for p in adapter.pairs() {
        *counts.entry(p.rank).or_insert(0usize) += 1;
    }
    let r = counts
        .iter()
        .max_by_key(|&(&rank, &n)| (n, std::cmp::Reverse(rank)))
        .map_or(1, |(&rank, _)| rank);
    let mut rank_pattern = BTreeMap::new();
    let mut alpha_pattern = BTreeMap::new();
    for (p, m) in adapter.pairs().iter().zip(&modules) {
        if p.rank != r {
            rank_pattern.insert(m.path.clone(), p.rank);
            if alpha == 0.0 {
                alpha_pattern.insert(m.path.clone(), Number::of(p.rank as f32));
            }
        }
    }
    let config = ConfigJson {
        alpha_pattern,
        base_model_name_or_path: options.base_model_name_or_path.as_deref(),
        bias: "none",
        fan_in_fan_out: false,
        inference_mode: true,
        init_lora_weights: true,
        lora_alpha: Number::of(if alpha == 0.0 { r as f32 } else { alpha }),
        lora_dropout: options.lora_dropout,
        modules_to_save: None,
        peft_type: "LORA",
        r,
        rank_pattern,
        revision: options.revision.as_deref(),
        target_modules: target_modules(&modules, cfg.n_layer),
        task_type: "CAUSAL_LM",
        use_rslora: options.use_rslora,
    };
    let config = serde_json::to_string_pretty(&config).map_err(|e| invalid(e.to_string()))?;

    let weights = safetensors_bytes(adapter, cfg, &modules, &label)?;
    commit(
        dir,
        &[(WEIGHTS_FILE, &weights), (CONFIG_FILE, config.as_bytes())],
    )
}

/// `target_modules`, sorted: a module's name (`q_proj`) where every layer has a pair for
/// it, else the paths of those that have one (`layers.0.self_attn.q_proj`), so that PEFT
/// puts LoRA layers on exactly the modules the file has tensors for (a LoRA layer without
/// its tensors is a "missing adapter keys" warning).
fn target_modules(modules: &[Module], n_layer: usize) -> Vec<String> {
    let mut targets = BTreeSet::new();
    for &(name, _) in &MODULES {
        let of: Vec<&Module> = modules.iter().filter(|m| m.name == name).collect();
        // Every layer is below `n_layer` (checked), so as many layers as the model's are all.
        let layers: BTreeSet<usize> = of.iter().map(|m| m.layer).collect();
        if of.is_empty() {
            continue;
        } else if layers.len() == n_layer {
            targets.insert(name.to_string());
        } else {
            targets.extend(of.iter().map(|m| m.path.clone()));
        }
    }
    targets.into_iter().collect()
}

/// A pair's PEFT module.
struct Module {
    /// `q_proj`, as `target_modules` names it.
    name: &'static str,
    /// Its layer, `N`.
    layer: usize,
    /// `layers.N.self_attn.q_proj`: the module's path under the model, as the reader's
    /// patterns match it and as PEFT's pattern keys match the end of its module names.
    path: String,
    /// Which heads permute its `B`'s rows for llama: q's, k's, or none.
    heads: Heads,
}

#[derive(Clone, Copy, PartialEq)]
enum Heads {
    None,
    Q,
    K,
}

/// The PEFT module of GGUF tensor `blk.N.<name>.weight`, if it is one of [`MODULES`].
fn peft_module(base: &str) -> Option<Module> {
    let rest = base.strip_prefix("blk.")?.strip_suffix(".weight")?;
    let (il, gguf) = rest.split_once('.')?;
    let il: usize = il.parse().ok()?;
    let at = MODULES.iter().position(|(_, g)| *g == gguf)?;
    let name = MODULES[at].0;
    let block = if at < 4 { "self_attn" } else { "mlp" };
    let heads = match gguf {
        "attn_q" => Heads::Q,
        "attn_k" => Heads::K,
        _ => Heads::None,
    };
    Some(Module {
        name,
        layer: il,
        path: format!("layers.{il}.{block}.{name}"),
        heads,
    })
}

/// `adapter_model.safetensors`: `lora_A` `[r, in]` and `lora_B` `[out, r]` of each pair in
/// F32 little-endian, with the `{"format": "pt"}` metadata PEFT's `save_file` gives it.
fn safetensors_bytes(
    adapter: &LoraAdapter,
    cfg: &ModelConfig,
    modules: &[Module],
    label: &str,
) -> Result<Vec<u8>, LoraError> {
    let le = |v: &[f32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    let mut tensors: Vec<(String, Vec<usize>, Vec<u8>)> = Vec::with_capacity(2 * modules.len());
    for (p, m) in adapter.pairs().iter().zip(modules) {
        let b = hf_rows(p, m, cfg, label)?;
        let name = format!("base_model.model.model.{}", m.path);
        tensors.push((
            format!("{name}.lora_A.weight"),
            vec![p.rank, p.n_in],
            le(&p.a),
        ));
        tensors.push((
            format!("{name}.lora_B.weight"),
            vec![p.n_out, p.rank],
            le(&b),
        ));
    }
    let mut views = Vec::with_capacity(tensors.len());
    for (name, shape, bytes) in &tensors {
        let view =
            TensorView::new(Dtype::F32, shape.clone(), bytes).map_err(|e| LoraError::Invalid {
                file: label.to_string(),
                what: format!("tensor `{name}`: {e}"),
            })?;
        views.push((name.as_str(), view));
    }
    let metadata = HashMap::from([("format".to_string(), "pt".to_string())]);
    safetensors::serialize(views, Some(metadata)).map_err(|e| LoraError::Invalid {
        file: label.to_string(),
        what: format!("safetensors: {e}"),
    })
}

/// `B` in the Hugging Face model's row order: llama's q and k un-permuted per head.
fn hf_rows(
    p: &LoraPair,
    m: &Module,
    cfg: &ModelConfig,
    label: &str,
) -> Result<Vec<f32>, LoraError> {
    let n_head = match m.heads {
        Heads::Q => cfg.n_head,
        Heads::K => cfg.n_head_kv,
        Heads::None => return Ok(p.b.clone()),
    };
    if cfg.arch != Arch::Llama {
        return Ok(p.b.clone());
    }
    if n_head == 0 || !p.n_out.is_multiple_of(2 * n_head) {
        return Err(LoraError::Shape {
            file: label.to_string(),
            tensor: format!("{}.lora_b", p.base),
            expected: vec![p.rank as u64, (n_head * cfg.head_dim_k) as u64],
            found: vec![p.rank as u64, p.n_out as u64],
        });
    }
    Ok(unpermute_rows(&p.b, n_head, p.n_out / n_head, p.rank))
}

/// Puts `files` in `dir`, each whole or not at all (see [`write()`]).
fn commit(dir: &Path, files: &[(&str, &[u8])]) -> Result<(), LoraError> {
    let write_err = |path: &Path| {
        let file = path.display().to_string();
        move |source| LoraError::Write { file, source }
    };
    match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => {
            let mut staged = Vec::with_capacity(files.len());
            for &(name, bytes) in files {
                let path = dir.join(name);
                let prefix = format!(".{name}.");
                let mut tmp = temp_builder(&prefix, 0o666)
                    .tempfile_in(dir)
                    .map_err(write_err(&path))?;
                tmp.write_all(bytes).map_err(write_err(tmp.path()))?;
                tmp.as_file().sync_all().map_err(write_err(tmp.path()))?;
                staged.push((tmp, path));
            }
            // Renamed only once every file is staged, the config last.
            for (tmp, path) in staged {
                tmp.persist(&path).map_err(|e| write_err(&path)(e.error))?;
            }
            Ok(())
        }
        Ok(_) => Err(LoraError::NotADirectory {
            path: dir.display().to_string(),
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let parent = match dir.parent() {
                Some(p) if !p.as_os_str().is_empty() => p,
                _ => Path::new("."),
            };
            std::fs::create_dir_all(parent).map_err(write_err(parent))?;
            let stem = dir
                .file_name()
                .map_or_else(|| "adapter".into(), |n| n.to_string_lossy());
            let prefix = format!(".{stem}.");
            let tmp = temp_builder(&prefix, 0o777)
                .tempdir_in(parent)
                .map_err(write_err(dir))?;
            for &(name, bytes) in files {
                let path = tmp.path().join(name);
                let mut file = std::fs::File::create(&path).map_err(write_err(&path))?;
                file.write_all(bytes).map_err(write_err(&path))?;
                file.sync_all().map_err(write_err(&path))?;
            }
            std::fs::rename(tmp.path(), dir).map_err(write_err(dir))?;
            // Renamed: nothing is left at the temporary name to clean up.
            let _ = tmp.keep();
            Ok(())
        }
        Err(e) => Err(write_err(dir)(e)),
    }
}

/// A temporary name of `prefix` (hidden, `.name.`) and `.tmp`, created with `mode` less the
/// umask, as a plain file or directory would be (tempfile's own default is owner-only).
fn temp_builder(prefix: &str, mode: u32) -> tempfile::Builder<'_, 'static> {
    let mut b = tempfile::Builder::new();
    b.prefix(prefix).suffix(".tmp");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        b.permissions(std::fs::Permissions::from_mode(mode));
    }
    #[cfg(not(unix))]
    let _ = mode;
    b
}

#[cfg(test)]
mod tests;
