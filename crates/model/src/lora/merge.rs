//! Merging LoRA adapters into a model: a GGUF of the base's tensors and formats, each
//! updated projection dequantized, given `Σ sᵢ·Bᵢ·Aᵢ` (summed in f64 and rounded once) and
//! quantized back into its own type by `rullama-quant` (llama.cpp's reference quantizers);
//! every other tensor and the metadata copied as they are. The file is written tensor by
//! tensor (a model larger than memory never is held whole), whole or not at all
//! (`rullama_gguf::write_whole`: a temporary file beside `OUT`, renamed once complete).

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;

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
    // The merge's own error, kept while `write_whole` sees it as an I/O error that stops
    // the write.
    let mut outcome = None;
    let written = rullama_gguf::write_whole(out, |w| {
        let result = write(file, &updates, w);
        let stop = match &result {
            Ok(_) => Ok(()),
            Err(e) => Err(std::io::Error::other(e.to_string())),
        };
        outcome = Some(result);
        stop
    });
    match (outcome, written) {
        (Some(Err(e)), _) => Err(e),
        (_, Err(e)) => Err(write_err(out, e)),
        (Some(Ok(summary)), Ok(())) => Ok(summary),
        (None, Ok(())) => unreachable!("write_whole ran the write"),
    }
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
    out: &mut dyn Write,
) -> Result<MergeSummary> {
    let infos: Vec<_> = file.tensors().cloned().collect();
    let n = infos.len();
    let mut stream = TensorStream::new(out, file.metadata(), infos.clone())?;
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
