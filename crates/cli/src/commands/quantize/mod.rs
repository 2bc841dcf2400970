//! `rullama quantize IN OUT TYPE`: llama-quantize's file types, written by the quant crate's
//! reference quantizers (no importance matrix).
//!
//! Each tensor gets the type `rullama_quant::mix` gives it (llama-quantize's rule); every
//! metadata key is kept, `general.file_type` and `general.quantization_version` set. Tensors
//! stream from IN to OUT a chunk of rows at a time (`convert.rs`), so memory stays at a few
//! chunks; OUT is written as a temporary file beside it and renamed once complete, so an
//! error or Ctrl-C leaves no partial OUT. Tensors are written in llama-quantize's order (by
//! layer, then name) with its key order, so OUT has the layout llama-quantize gives it.

mod convert;

use std::collections::BTreeMap;
use std::io::{BufWriter, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use rullama_gguf::{GgmlType, GgufFile, Metadata, RangedFile, TensorInfo, TensorStream};
use rullama_quant::mix::{FileType, MixError, MixTensor, ModelFacts, llama_order, tensor_types};
use rullama_quant::{Format, QuantError};
use serde::Serialize;

use super::CliError;
use crate::units;

#[derive(clap::Args)]
pub struct Args {
    /// The GGUF model to quantize: F32, F16 or BF16 (a quantized one with --allow-requantize).
    input: PathBuf,
    /// The GGUF file to write (through a temporary file beside it, renamed when complete).
    output: PathBuf,
    /// The file type, as llama-quantize names it (any case) or numbers it: Q4_0, Q4_1, Q5_0,
    /// Q5_1, Q2_K, Q3_K_S, Q3_K_M, Q3_K_L, Q4_K_S, Q4_K_M, Q5_K_S, Q5_K_M, Q6_K, Q8_0, F16,
    /// BF16, F32; Q3_K, Q4_K and Q5_K are their _M mixes.
    #[arg(value_name = "TYPE")]
    file_type: String,
    /// Re-encode tensors that are already quantized (quality suffers: their values are
    /// decoded, then rounded a second time).
    #[arg(long)]
    allow_requantize: bool,
    /// Threads that quantize (default: every core).
    #[arg(long, short = 't')]
    threads: Option<usize>,
    /// Print the summary as JSON (for scripts); no progress bar.
    #[arg(long)]
    json: bool,
}

/// Why a model cannot be quantized; each names the file or the tensor.
#[derive(Debug, thiserror::Error)]
pub enum QuantizeError {
    #[error("unknown type `{given}`: the types are {known}")]
    UnknownType { given: String, known: String },
    #[error("{}: the output would replace the input", path.display())]
    SameFile { path: PathBuf },
    #[error("{}: split into {count} files; quantize a merged file (llama-gguf-split --merge)", path.display())]
    Split { path: PathBuf, count: u64 },
    #[error("{}: {error}", path.display())]
    Mix { path: PathBuf, error: MixError },
    #[error(
        "{}: tensor {tensor} is {ggml_type}, already quantized: --allow-requantize re-encodes it",
        path.display()
    )]
    Requantize {
        path: PathBuf,
        tensor: String,
        ggml_type: GgmlType,
    },
    #[error("{}: tensor {tensor} is {ggml_type}, a type rullama cannot decode", path.display())]
    Unreadable {
        path: PathBuf,
        tensor: String,
        ggml_type: GgmlType,
    },
    #[error("tensor {tensor}: {error}")]
    Quant { tensor: String, error: QuantError },
    #[error("tensor {tensor}: row {row} holds {value}, which no format can encode")]
    NonFinite {
        tensor: String,
        row: usize,
        value: f32,
    },
    #[error("{}: {error}", path.display())]
    Io {
        path: PathBuf,
        error: std::io::Error,
    },
}

/// What was done; the text summary and `--json` are two renderings of it.
#[derive(Serialize)]
struct Report {
    input: String,
    output: String,
    #[serde(rename = "type")]
    file_type: String,
    /// `general.file_type` written.
    file_type_id: u32,
    input_bytes: u64,
    output_bytes: u64,
    parameters: u64,
    input_bits_per_weight: f64,
    output_bits_per_weight: f64,
    tensors: usize,
    /// Tensors whose type changed.
    converted: usize,
    /// Tensors per output type.
    types: BTreeMap<String, usize>,
    seconds: f64,
}

/// llama.cpp's `GGML_QNT_VERSION`, which llama-quantize writes.
const QUANTIZATION_VERSION: u32 = 2;

/// The metadata of OUT: IN's, then the quantization version and file type (moved last, where
/// llama-quantize's `gguf_set_val_u32` puts them), without the split keys (OUT is one file).
fn output_metadata(meta: &Metadata, ftype: FileType) -> Metadata {
    let mut meta = meta.clone();
    meta.remove("general.quantization_version");
    meta.insert("general.quantization_version", QUANTIZATION_VERSION);
    meta.remove("general.file_type");
    meta.insert("general.file_type", ftype.id());
    for key in ["split.no", "split.count", "split.tensors.count"] {
        meta.remove(key);
    }
    meta
}

/// Each tensor of IN with its description in OUT, in the order OUT holds them, after checking
/// that each can be produced from what IN holds.
fn plan<'a>(
    path: &Path,
    file: &'a GgufFile<RangedFile>,
    ftype: FileType,
    allow_requantize: bool,
) -> Result<Vec<(&'a TensorInfo, TensorInfo)>, CliError> {
    let meta = file.metadata();
    if let Some(count) = meta.get_opt::<&rullama_gguf::Value>("split.count")? {
        let count = count.as_u64_lenient().unwrap_or(0);
        if count > 1 {
            let path = path.to_path_buf();
            return Err(QuantizeError::Split { path, count }.into());
        }
    }
    let facts = ModelFacts::from_metadata(meta).map_err(|e| e.in_file(path))?;
    let infos: Vec<&TensorInfo> = file.tensors().collect();
    let mix: Vec<MixTensor<'_>> = infos
        .iter()
        .map(|i| MixTensor {
            name: &i.name,
            dims: &i.dims,
            ggml_type: i.ggml_type,
        })
        .collect();
    let types = tensor_types(ftype, &facts, &mix).map_err(|error| QuantizeError::Mix {
        path: path.to_path_buf(),
        error,
    })?;
    let names: Vec<&str> = infos.iter().map(|i| i.name.as_str()).collect();
    let mut out = Vec::with_capacity(infos.len());
    for i in llama_order(&names) {
        let (info, to) = (infos[i], types[i]);
        let (tensor, ggml_type) = (info.name.clone(), info.ggml_type);
        let path = path.to_path_buf();
        if ggml_type != to {
            if !rullama_quant::is_supported(Format::Ggml(ggml_type)) {
                let e = QuantizeError::Unreadable {
                    path,
                    tensor,
                    ggml_type,
                };
                return Err(e.into());
            }
            let plain = matches!(ggml_type, GgmlType::F32 | GgmlType::F16 | GgmlType::Bf16);
            if !plain && !allow_requantize {
                let e = QuantizeError::Requantize {
                    path,
                    tensor,
                    ggml_type,
                };
                return Err(e.into());
            }
        }
        let typed = TensorInfo::new(info.name.as_str(), &info.dims, to, 0)
            .map_err(|error| rullama_gguf::GgufError::InvalidTensor { tensor, error })?;
        out.push((info, typed));
    }
    Ok(out)
}

/// A bar of values done, drawn on stderr where it is a terminal and `--json` is off.
fn progress_bar(total: u64, json: bool) -> ProgressBar {
    let target = if json || !std::io::stderr().is_terminal() {
        ProgressDrawTarget::hidden()
    } else {
        ProgressDrawTarget::stderr()
    };
    let bar = ProgressBar::with_draw_target(Some(total), target);
    let style =
        ProgressStyle::with_template("{bar:40} {percent:>3}% {elapsed_precise} (ETA {eta}) {msg}")
            .expect("a valid template");
    bar.set_style(style);
    bar
}

pub fn run(args: &Args) -> Result<(), CliError> {
    let start = Instant::now();
    let ftype = FileType::parse(&args.file_type).ok_or_else(|| QuantizeError::UnknownType {
        given: args.file_type.clone(),
        known: FileType::names(),
    })?;
    let file = GgufFile::open_ranged(&args.input)?;
    let same = std::fs::canonicalize(&args.input)
        .ok()
        .zip(std::fs::canonicalize(&args.output).ok())
        .is_some_and(|(a, b)| a == b);
    if same {
        let path = args.output.clone();
        return Err(QuantizeError::SameFile { path }.into());
    }
    let plan = plan(&args.input, &file, ftype, args.allow_requantize)?;
    let infos: Vec<TensorInfo> = plan.iter().map(|(_, to)| to.clone()).collect();
    let meta = output_metadata(file.metadata(), ftype);
    let threads = args
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .max(1);
    convert::install_interrupt()?;

    // The temporary file is removed if anything below fails (or Ctrl-C stops it).
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |error| QuantizeError::Io { path, error }
    };
    let dir = match args.output.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = args
        .output
        .file_name()
        .map_or_else(|| "out".into(), |n| n.to_string_lossy().into_owned());
    let prefix = format!(".{name}.");
    let mut builder = tempfile::Builder::new();
    builder.prefix(&prefix).suffix(".partial");
    // A model file, not a secret: the usual mode (umask applies), not a temporary's 0600.
    #[cfg(unix)]
    builder.permissions(std::os::unix::fs::PermissionsExt::from_mode(0o666));
    let temp = builder.tempfile_in(&dir).map_err(io(&args.output))?;
    let total: u64 = infos.iter().map(|i| i.n_elements).sum();
    let bar = progress_bar(total, args.json);
    let done = |n: u64| bar.inc(n);
    let mut stream = TensorStream::new(
        BufWriter::with_capacity(8 << 20, temp.as_file()),
        &meta,
        infos.clone(),
    )
    .map_err(|e| e.in_file(temp.path()))?;
    let mut converted = 0;
    for (from, to) in &plan {
        bar.set_message(from.name.clone());
        if from.ggml_type == to.ggml_type {
            convert::copy(&file, from, &mut stream, &done)?;
        } else {
            convert::convert(&file, from, to.ggml_type, threads, &mut stream, &done)?;
            converted += 1;
        }
    }
    let output_bytes = stream.finish().map_err(|e| e.in_file(temp.path()))?;
    temp.as_file().sync_all().map_err(io(temp.path()))?;
    temp.persist(&args.output)
        .map_err(|e| io(&args.output)(e.error))?;
    bar.finish_and_clear();

    let input_bytes = std::fs::metadata(&args.input)
        .map_err(io(&args.input))?
        .len();
    let bpw = |bytes: u64| bytes as f64 * 8.0 / total.max(1) as f64;
    let mut types = BTreeMap::new();
    for info in &infos {
        *types.entry(info.ggml_type.to_string()).or_insert(0) += 1;
    }
    let report = Report {
        input: args.input.display().to_string(),
        output: args.output.display().to_string(),
        file_type: ftype.name().to_string(),
        file_type_id: ftype.id(),
        input_bytes,
        output_bytes,
        parameters: total,
        input_bits_per_weight: bpw(file.tensors().map(|i| i.n_bytes).sum()),
        output_bits_per_weight: bpw(infos.iter().map(|i| i.n_bytes).sum()),
        tensors: infos.len(),
        converted,
        types,
        seconds: start.elapsed().as_secs_f64(),
    };
    print_report(&report, args.json)
}

fn print_report(r: &Report, json: bool) -> Result<(), CliError> {
    let mut out = std::io::stdout().lock();
    if json {
        serde_json::to_writer_pretty(&mut out, r)?;
        writeln!(out)?;
        return Ok(());
    }
    let types: Vec<String> = r.types.iter().map(|(t, n)| format!("{t} {n}")).collect();
    writeln!(
        out,
        "{} -> {} ({}) in {:.1} s",
        r.input, r.output, r.file_type, r.seconds
    )?;
    writeln!(
        out,
        "size: {} -> {}; bits per weight: {:.2} -> {:.2} ({} parameters)",
        units::bytes(r.input_bytes),
        units::bytes(r.output_bytes),
        r.input_bits_per_weight,
        r.output_bits_per_weight,
        units::count(r.parameters)
    )?;
    writeln!(
        out,
        "tensors: {} ({} re-encoded): {}",
        r.tensors,
        r.converted,
        types.join(", ")
    )?;
    Ok(())
}
