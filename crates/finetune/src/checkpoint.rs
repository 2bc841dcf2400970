//! Checkpoints: everything a run needs to go on exactly where it stopped — the adapter's
//! values, AdamW's moments and step count, the data position — in one safetensors file
//! (the format's own crate), f64 as the tape holds them, so a resumed run computes the
//! same bits as one that never stopped. The data order and the adapter's initial values
//! follow from the seed; nothing else draws random numbers, so no RNG state is saved.
//!
//! Tensors `param.{i}`, `adam_m.{i}`, `adam_v.{i}` (`[rows, cols]`, F64); metadata (strings):
//! `format` (`rullama-finetune-checkpoint-1`), `steps`, `position` (JSON), `lora` (the
//! spec, JSON), `bases` (the adapted tensors' names, JSON), `optim` (AdamW's settings,
//! JSON).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use safetensors::{Dtype, SafeTensors, tensor::TensorView};

use crate::data::Position;
use crate::error::{FinetuneError, Result};
use crate::lora::LoraSpec;
use crate::optim::{AdamW, AdamWConfig};
use crate::tape::Matrix;
use crate::train::Trainer;

const FORMAT: &str = "rullama-finetune-checkpoint-1";

/// A saved run, read back.
#[derive(Debug, Clone, PartialEq)]
pub struct Checkpoint {
    /// The adapter's shape.
    pub spec: LoraSpec,
    /// The adapted base tensors, in parameter order.
    pub bases: Vec<String>,
    /// The adapter's values.
    pub params: Vec<Matrix>,
    /// The optimizer's state.
    pub optimizer: AdamW,
    /// Where the data stood.
    pub position: Position,
}

fn bad(path: &Path, what: impl Into<String>) -> FinetuneError {
    FinetuneError::Checkpoint {
        path: path.to_path_buf(),
        what: what.into(),
    }
}

/// Writes `trainer`'s state and the data `position` to `path`, whole or not at all (a
/// temporary file beside it, renamed).
pub fn save(path: &Path, trainer: &Trainer<'_>, position: Position) -> Result<()> {
    let opt = trainer.optimizer()?;
    let params = trainer.params()?;
    let groups = [
        ("param", &params[..]),
        ("adam_m", &opt.m[..]),
        ("adam_v", &opt.v[..]),
    ];
    let bytes: Vec<(String, Vec<usize>, Vec<u8>)> = groups
        .iter()
        .flat_map(|(name, ms)| {
            ms.iter().enumerate().map(move |(i, m)| {
                let data = m.data.iter().flat_map(|v| v.to_le_bytes()).collect();
                (format!("{name}.{i}"), vec![m.rows, m.cols], data)
            })
        })
        .collect();
    let json = |v: serde_json::Result<String>| v.map_err(|e| bad(path, e.to_string()));
    let bases = trainer.lora().bases();
    let meta = HashMap::from([
        ("format".to_string(), FORMAT.to_string()),
        ("steps".to_string(), opt.steps.to_string()),
        (
            "position".to_string(),
            json(serde_json::to_string(&position))?,
        ),
        (
            "lora".to_string(),
            json(serde_json::to_string(trainer.lora().spec()))?,
        ),
        ("bases".to_string(), json(serde_json::to_string(&bases))?),
        (
            "optim".to_string(),
            json(serde_json::to_string(&opt.config))?,
        ),
    ]);
    let views = bytes
        .iter()
        .map(|(name, shape, data)| {
            let view = TensorView::new(Dtype::F64, shape.clone(), data)
                .map_err(|e| bad(path, e.to_string()))?;
            Ok((name.clone(), view))
        })
        .collect::<Result<Vec<_>>>()?;
    let out = safetensors::serialize(views, Some(meta)).map_err(|e| bad(path, e.to_string()))?;
    rullama_gguf::write_whole(path, |w| w.write_all(&out)).map_err(|e| FinetuneError::Write {
        path: path.to_path_buf(),
        source: e,
    })
}

/// Reads the checkpoint at `path`.
pub fn load(path: &Path) -> Result<Checkpoint> {
    let bytes = std::fs::read(path).map_err(|e| bad(path, e.to_string()))?;
    let (_, header) = SafeTensors::read_metadata(&bytes)
        .map_err(|e| bad(path, format!("not a safetensors file: {e}")))?;
    let meta = header.metadata().clone().unwrap_or_default();
    let get = |key: &str| {
        meta.get(key)
            .ok_or_else(|| bad(path, format!("metadata `{key}` is missing")))
    };
    if get("format")? != FORMAT {
        return Err(bad(
            path,
            format!("format is `{}`, expected `{FORMAT}`", get("format")?),
        ));
    }
    let parse_err = |key: &str, e: serde_json::Error| bad(path, format!("metadata `{key}`: {e}"));
    let spec: LoraSpec = serde_json::from_str(get("lora")?).map_err(|e| parse_err("lora", e))?;
    let bases: Vec<String> =
        serde_json::from_str(get("bases")?).map_err(|e| parse_err("bases", e))?;
    let position: Position =
        serde_json::from_str(get("position")?).map_err(|e| parse_err("position", e))?;
    let config: AdamWConfig =
        serde_json::from_str(get("optim")?).map_err(|e| parse_err("optim", e))?;
    let steps: u64 = get("steps")?
        .parse()
        .map_err(|_| bad(path, "metadata `steps` is not a count"))?;
    let tensors = SafeTensors::deserialize(&bytes).map_err(|e| bad(path, e.to_string()))?;
    let group = |name: &str| -> Result<Vec<Matrix>> {
        (0..2 * bases.len())
            .map(|i| {
                let key = format!("{name}.{i}");
                let t = tensors
                    .tensor(&key)
                    .map_err(|e| bad(path, format!("`{key}`: {e}")))?;
                let [rows, cols] = t.shape()[..] else {
                    return Err(bad(path, format!("`{key}` is not a matrix")));
                };
                if t.dtype() != Dtype::F64 {
                    return Err(bad(
                        path,
                        format!("`{key}` is {:?}, expected F64", t.dtype()),
                    ));
                }
                let data = t
                    .data()
                    .chunks_exact(8)
                    .map(|c| f64::from_le_bytes(c.try_into().expect("8 bytes")))
                    .collect();
                Ok(Matrix::new(rows, cols, data))
            })
            .collect()
    };
    let params = group("param")?;
    let optimizer = AdamW {
        config,
        m: group("adam_m")?,
        v: group("adam_v")?,
        steps,
    };
    Ok(Checkpoint {
        spec,
        bases,
        params,
        optimizer,
        position,
    })
}

impl Checkpoint {
    /// Puts this checkpoint's state into `trainer`, after checking it is of the same
    /// adapter (spec, tensors, shapes): a checkpoint of another run is refused.
    pub fn restore_into(self, path: &Path, trainer: &mut Trainer<'_>) -> Result<Position> {
        if &self.spec != trainer.lora().spec() {
            return Err(bad(
                path,
                format!(
                    "it trains {:?}, this run {:?}",
                    self.spec,
                    trainer.lora().spec()
                ),
            ));
        }
        let bases = trainer.lora().bases();
        if self.bases != bases {
            return Err(bad(
                path,
                "it adapts other tensors than this model's (another model?)",
            ));
        }
        let same = |a: &[Matrix], b: &[Matrix]| {
            a.len() == b.len()
                && a.iter()
                    .zip(b)
                    .all(|(a, b)| (a.rows, a.cols) == (b.rows, b.cols))
        };
        let params = trainer.params()?;
        if !same(&self.params, &params)
            || !same(&self.optimizer.m, &params)
            || !same(&self.optimizer.v, &params)
        {
            return Err(bad(
                path,
                "its matrices have other shapes than this model's",
            ));
        }
        trainer.restore(self.params, self.optimizer)?;
        Ok(self.position)
    }
}

/// Where a run keeps its checkpoint beside adapter `out`: `out.ckpt.safetensors`.
pub fn path_for(out: &Path) -> PathBuf {
    let mut name = out.as_os_str().to_owned();
    name.push(".ckpt.safetensors");
    PathBuf::from(name)
}
