//! `rullama inspect MODEL`: what a user wants to know about a model file before running it;
//! with `--gpu`, also the device memory the GPU executor holds for it (`gpu.rs`).

mod gpu;

use std::collections::BTreeMap;
use std::io::Write;

use rullama_gguf::store::{self, ModelSource};
use rullama_gguf::{Array, GgufFile, Metadata, Value};
use serde::Serialize;
use serde_json::json;

use super::CliError;
use crate::units;

#[derive(clap::Args)]
pub struct Args {
    /// A GGUF path, an Ollama name (`gemma3:270m`) or a cached test model (`gemma3-270m`).
    model: String,
    /// Print the report as JSON (for scripts).
    #[arg(long)]
    json: bool,
    /// Leave out the per-tensor table.
    #[arg(long)]
    no_tensors: bool,
    /// Load the model on the GPU executor and report its device memory by role (weights,
    /// KV cache of --ctx positions, the built decode step).
    #[arg(long)]
    gpu: bool,
    /// KV cache positions for --gpu (4096: the most `rullama run` takes without --ctx), 1 to
    /// 4294967295; a cache the GPU cannot hold is an error saying what fits.
    #[arg(long, default_value_t = 4096, requires = "gpu",
          value_parser = super::generation::ctx_parser())]
    ctx: usize,
}

/// Everything `inspect` reports; the text output and `--json` are two renderings of it.
#[derive(Serialize)]
struct Report {
    path: String,
    source: String,
    file_bytes: u64,
    gguf_version: u32,
    alignment: u64,
    metadata_keys: usize,
    architecture: Option<String>,
    name: Option<String>,
    /// Every `{architecture}.*` key, without the prefix: what the model graph is built from.
    hyper_parameters: BTreeMap<String, serde_json::Value>,
    tokenizer: Option<Tokenizer>,
    parameters: u64,
    tensor_bytes: u64,
    bits_per_weight: f64,
    types: Vec<TypeTotal>,
    tensors: Vec<Tensor>,
    /// With `--gpu` only.
    #[serde(skip_serializing_if = "Option::is_none")]
    gpu_memory: Option<gpu::GpuMemory>,
}

#[derive(Serialize)]
struct Tokenizer {
    model: String,
    pre: Option<String>,
    tokens: usize,
    merges: Option<usize>,
    /// Special token ids by role (`bos`, `eos`, ...), as `tokenizer.ggml.<role>_token_id`.
    special: BTreeMap<String, u64>,
    add_bos: Option<bool>,
    add_eos: Option<bool>,
    chat_template_chars: Option<usize>,
}

#[derive(Serialize)]
struct TypeTotal {
    #[serde(rename = "type")]
    ggml_type: String,
    tensors: usize,
    parameters: u64,
    bytes: u64,
}

#[derive(Serialize)]
struct Tensor {
    name: String,
    #[serde(rename = "type")]
    ggml_type: String,
    shape: Vec<u64>,
    bytes: u64,
}

pub fn run(args: &Args) -> Result<(), CliError> {
    let resolved = store::resolve(&args.model)?;
    let file = GgufFile::open(&resolved.path)?;
    let source = match &resolved.source {
        ModelSource::Path => "path".to_string(),
        ModelSource::Cached { name } => format!("cached test model {name}"),
        ModelSource::Ollama { name } => format!("Ollama {name}"),
    };
    let mut report = build_report(&file, resolved.path.display().to_string(), source);
    if args.gpu {
        report.gpu_memory = Some(gpu::measure(&resolved.path, args.ctx)?);
    }
    let mut out = std::io::stdout().lock();
    if args.json {
        serde_json::to_writer_pretty(&mut out, &report)?;
        writeln!(out)?;
    } else {
        print_text(&mut out, &report, !args.no_tensors)?;
        if let Some(m) = &report.gpu_memory {
            gpu::print_text(&mut out, m)?;
        }
    }
    Ok(())
}

fn build_report(file: &GgufFile, path: String, source: String) -> Report {
    let metadata = file.metadata();
    let architecture = metadata.architecture().ok().map(str::to_string);
    let prefix = architecture.as_deref().map(|a| format!("{a}."));
    let hyper_parameters = metadata
        .iter()
        .filter_map(|(key, value)| {
            let suffix = key.strip_prefix(prefix.as_deref()?)?;
            Some((suffix.to_string(), to_json(value)))
        })
        .collect();

    let mut totals: BTreeMap<_, TypeTotal> = BTreeMap::new();
    let mut tensors = Vec::new();
    for info in file.tensors() {
        let total = totals.entry(info.ggml_type).or_insert_with(|| TypeTotal {
            ggml_type: info.ggml_type.to_string(),
            tensors: 0,
            parameters: 0,
            bytes: 0,
        });
        total.tensors += 1;
        total.parameters += info.n_elements;
        total.bytes += info.n_bytes;
        tensors.push(Tensor {
            name: info.name.clone(),
            ggml_type: info.ggml_type.to_string(),
            shape: info.dims.clone(),
            bytes: info.n_bytes,
        });
    }
    let parameters: u64 = totals.values().map(|t| t.parameters).sum();
    let tensor_bytes: u64 = totals.values().map(|t| t.bytes).sum();
    Report {
        path,
        source,
        file_bytes: file.as_bytes().len() as u64,
        gguf_version: file.header().version(),
        alignment: file.header().alignment(),
        metadata_keys: metadata.len(),
        name: metadata.get_str("general.name").ok().map(str::to_string),
        architecture,
        hyper_parameters,
        tokenizer: tokenizer_summary(metadata),
        parameters,
        tensor_bytes,
        bits_per_weight: if parameters == 0 {
            0.0
        } else {
            tensor_bytes as f64 * 8.0 / parameters as f64
        },
        types: totals.into_values().collect(),
        tensors,
        gpu_memory: None,
    }
}

fn tokenizer_summary(metadata: &Metadata) -> Option<Tokenizer> {
    let model = metadata.get_str("tokenizer.ggml.model").ok()?.to_string();
    let special = metadata
        .iter()
        .filter_map(|(key, value)| {
            let role = key
                .strip_prefix("tokenizer.ggml.")?
                .strip_suffix("_token_id")?;
            Some((role.to_string(), value.as_u64_lenient()?))
        })
        .collect();
    let array_len = |key: &str| metadata.get_array(key).ok().map(Array::len);
    Some(Tokenizer {
        model,
        pre: metadata
            .get_str("tokenizer.ggml.pre")
            .ok()
            .map(str::to_string),
        tokens: array_len("tokenizer.ggml.tokens").unwrap_or(0),
        merges: array_len("tokenizer.ggml.merges"),
        special,
        add_bos: metadata.get_bool("tokenizer.ggml.add_bos_token").ok(),
        add_eos: metadata.get_bool("tokenizer.ggml.add_eos_token").ok(),
        chat_template_chars: metadata
            .get_str("tokenizer.chat_template")
            .ok()
            .map(|t| t.chars().count()),
    })
}

/// Arrays longer than this are summarised (`{"type": "f32", "len": 262144}`), not listed.
const ARRAY_LIST_LIMIT: usize = 64;

fn to_json(value: &Value) -> serde_json::Value {
    match value {
        Value::String(s) => json!(s),
        Value::Bool(b) => json!(b),
        // Through the shortest decimal of the f32, so 1e-6 prints as 1e-6, not 9.99999997e-7.
        Value::F32(v) => v
            .to_string()
            .parse::<f64>()
            .map_or(serde_json::Value::Null, |v| json!(v)),
        Value::F64(v) => json!(v),
        Value::Array(a) if a.len() > ARRAY_LIST_LIMIT => {
            json!({ "type": a.element_type().name(), "len": a.len() })
        }
        Value::Array(a) => (0..a.len())
            .filter_map(|i| a.get(i))
            .map(|v| to_json(&v))
            .collect(),
        other => other
            .as_i64_lenient()
            .map(|v| json!(v))
            .or_else(|| other.as_u64_lenient().map(|v| json!(v)))
            .unwrap_or(serde_json::Value::Null),
    }
}

fn print_text(out: &mut impl Write, r: &Report, with_tensors: bool) -> std::io::Result<()> {
    writeln!(
        out,
        "file          {} ({})",
        r.path,
        units::bytes(r.file_bytes)
    )?;
    writeln!(out, "source        {}", r.source)?;
    writeln!(
        out,
        "format        GGUF v{}, alignment {}, {} metadata keys, {} tensors",
        r.gguf_version,
        r.alignment,
        r.metadata_keys,
        r.tensors.len()
    )?;
    writeln!(
        out,
        "architecture  {}",
        r.architecture.as_deref().unwrap_or("(none)")
    )?;
    if let Some(name) = &r.name {
        writeln!(out, "name          {name}")?;
    }
    writeln!(
        out,
        "parameters    {} in {} ({:.2} bits per weight)",
        units::count(r.parameters),
        units::bytes(r.tensor_bytes),
        r.bits_per_weight
    )?;

    if !r.hyper_parameters.is_empty() {
        writeln!(
            out,
            "\nhyper-parameters ({}.*)",
            r.architecture.as_deref().unwrap_or("")
        )?;
        for (key, value) in &r.hyper_parameters {
            writeln!(out, "  {key:<40} {value}")?;
        }
    }

    if let Some(t) = &r.tokenizer {
        writeln!(out, "\ntokenizer")?;
        let pre = t
            .pre
            .as_deref()
            .map(|p| format!(", pre-tokenizer {p}"))
            .unwrap_or_default();
        writeln!(out, "  model {}{pre}, {} tokens", t.model, t.tokens)?;
        if let Some(m) = t.merges {
            writeln!(out, "  {m} merges")?;
        }
        let special: Vec<String> = t.special.iter().map(|(k, v)| format!("{k} {v}")).collect();
        if !special.is_empty() {
            writeln!(out, "  special ids: {}", special.join(", "))?;
        }
        let flag = |f: Option<bool>| f.map_or("unset".to_string(), |b| b.to_string());
        writeln!(
            out,
            "  add_bos {}, add_eos {}",
            flag(t.add_bos),
            flag(t.add_eos)
        )?;
        match t.chat_template_chars {
            Some(n) => writeln!(out, "  chat template: {n} characters")?,
            None => writeln!(out, "  chat template: none in the file")?,
        }
    }

    writeln!(out, "\ntensor types")?;
    writeln!(
        out,
        "  {:<10} {:>7} {:>12} {:>12}",
        "type", "tensors", "parameters", "bytes"
    )?;
    for t in &r.types {
        writeln!(
            out,
            "  {:<10} {:>7} {:>12} {:>12}",
            t.ggml_type,
            t.tensors,
            units::count(t.parameters),
            units::bytes(t.bytes)
        )?;
    }

    if with_tensors {
        writeln!(out, "\ntensors")?;
        let width = r.tensors.iter().map(|t| t.name.len()).max().unwrap_or(4);
        for t in &r.tensors {
            let shape: Vec<String> = t.shape.iter().map(u64::to_string).collect();
            writeln!(
                out,
                "  {:<width$} {:<9} {:<20} {:>12}",
                t.name,
                t.ggml_type,
                format!("[{}]", shape.join(", ")),
                units::bytes(t.bytes)
            )?;
        }
    }
    Ok(())
}
