//! Merging LoRA adapters into a model: a GGUF of the base's tensors and formats, each
//! updated projection dequantized, given `Σ sᵢ·Bᵢ·Aᵢ` (summed in f64 and rounded once) and
//! quantized back into its own type by `rullama-quant` (llama.cpp's reference quantizers);
//! every other tensor and the metadata copied as they are. The file is written tensor by
//! tensor (a model larger than memory never is held whole) to `OUT.partial` beside `OUT`,
//! and renamed to `OUT` once complete: an error leaves no `OUT` half written.

use std::collections::HashMap;
use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};

use rullama_gguf::{ByteSource, GgufFile, TensorStream};
use rullama_quant::Format;

use super::attach::{self, Combined};
use super::{LoraAdapter, LoraError};
use crate::config::ModelConfig;
use crate::error::{ModelError, Result};

/// What [`merge`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MergeSummary {
    /// Tensors that an adapter updated.
    pub merged: usize,
    /// Tensors in the file.
    pub tensors: usize,
    /// Bytes of the file.
    pub bytes: u64,
}

/// Merges `adapters` (each at its scale) into the model `file` and writes the result to
/// `out`. Every adapter is checked against the model first, as [`crate::Model::apply_loras`]
/// checks it. A projection whose type `rullama-quant` cannot quantize is an error naming it.
pub fn merge<S: ByteSource>(
    file: &GgufFile<S>,
    adapters: &[(&LoraAdapter, f32)],
    out: &Path,
) -> Result<MergeSummary> {
    let cfg = ModelConfig::from_gguf(file)?;
    attach::targets(file, &cfg)?.check_all(adapters, cfg.arch.name())?;
    let updates: HashMap<String, Combined> = attach::combined(adapters)
        .into_iter()
        .map(|c| (c.base.clone(), c))
        .collect();
    let partial = partial_path(out);
    let result = write(file, &updates, &partial).and_then(|summary| {
        std::fs::rename(&partial, out).map_err(|source| write_err(out, source))?;
        Ok(summary)
    });
    if result.is_err() {
        // Nothing half written is left behind; the error says what went wrong.
        let _ = std::fs::remove_file(&partial);
    }
    result
}

/// `OUT.partial`, beside `OUT`.
fn partial_path(out: &Path) -> PathBuf {
    let mut name = out.file_name().unwrap_or_default().to_os_string();
    name.push(".partial");
    out.with_file_name(name)
}

fn write_err(path: &Path, source: std::io::Error) -> ModelError {
    LoraError::Write {
        file: path.display().to_string(),
        source,
    }
    .into()
}

fn write<S: ByteSource>(
    file: &GgufFile<S>,
    updates: &HashMap<String, Combined>,
    path: &Path,
) -> Result<MergeSummary> {
    let out = File::create(path).map_err(|e| write_err(path, e))?;
    let infos: Vec<_> = file.tensors().cloned().collect();
    let n = infos.len();
    let mut stream = TensorStream::new(BufWriter::new(out), file.metadata(), infos.clone())?;
    let mut merged = 0;
    for info in &infos {
        let data = file.read_tensor(info)?;
        match updates.get(&info.name) {
            Some(update) => {
                stream.write_tensor(&updated(info, &data.data, update)?)?;
                merged += 1;
            }
            None => stream.write_tensor(&data.data)?,
        }
    }
    let bytes = stream.finish()?;
    Ok(MergeSummary {
        merged,
        tensors: n,
        bytes,
    })
}

/// `bytes` (the base tensor `info`) with `update` added, in the tensor's own type.
fn updated(info: &rullama_gguf::TensorInfo, bytes: &[u8], update: &Combined) -> Result<Vec<u8>> {
    let format = Format::Ggml(info.ggml_type);
    let err = |source| ModelError::Weight {
        name: info.name.clone(),
        source,
    };
    let mut w = rullama_quant::dequantize_to_vec(format, bytes).map_err(err)?;
    let (n_in, rank) = (update.n_in, update.rank);
    let mut row = vec![0f64; n_in];
    for (o, w_row) in w.chunks_exact_mut(n_in).enumerate() {
        row.iter_mut()
            .zip(w_row.iter())
            .for_each(|(r, &v)| *r = f64::from(v));
        for k in 0..rank {
            let bk = f64::from(update.b[o * rank + k]);
            if bk == 0.0 {
                continue;
            }
            let a = &update.a[k * n_in..(k + 1) * n_in];
            row.iter_mut()
                .zip(a)
                .for_each(|(r, &av)| *r += bk * f64::from(av));
        }
        w_row.iter_mut().zip(&row).for_each(|(v, &r)| *v = r as f32);
    }
    rullama_quant::quantize(format, &w).map_err(err)
}
