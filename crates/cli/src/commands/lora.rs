//! `--lora FILE[:SCALE]` (run, chat, perplexity, bench): LoRA adapters applied to the model
//! once it is loaded, as llama.cpp's `--lora FILE` and `--lora-scaled FILE SCALE` do; a
//! directory is a PEFT adapter (`rullama_model::lora::peft`).

use std::path::PathBuf;
use std::str::FromStr;

use rullama_model::{Backend, LoraAdapter, Model, ModelConfig, ModelError};

use super::CliError;

/// One `--lora` value: an adapter's file and the scale it runs at.
#[derive(Debug, Clone, PartialEq)]
pub struct LoraArg {
    /// A llama.cpp LoRA GGUF, or a PEFT directory (`adapter_config.json` and
    /// `adapter_model.safetensors`).
    pub path: PathBuf,
    /// Multiplies the adapter's update (1: as trained, 0: off).
    pub scale: f32,
}

impl FromStr for LoraArg {
    type Err = String;

    /// `FILE` (scale 1) or `FILE:SCALE`, the scale a finite number after the last `:`; a
    /// file whose name ends in `:<number>` is written `FILE:1`.
    fn from_str(s: &str) -> Result<LoraArg, String> {
        let (path, scale) = match s.rsplit_once(':') {
            Some((path, scale)) => match scale.parse::<f32>() {
                Ok(v) if v.is_finite() => (path, v),
                Ok(v) => return Err(format!("scale {v} is not a finite number")),
                Err(_) => (s, 1.0),
            },
            None => (s, 1.0),
        };
        if path.is_empty() {
            return Err("no file before the scale".into());
        }
        Ok(LoraArg {
            path: path.into(),
            scale,
        })
    }
}

/// An Ollama model's adapter layers (at scale 1, as Ollama applies them), then `given`.
pub fn with_layers(layers: Vec<PathBuf>, given: &[LoraArg]) -> Vec<LoraArg> {
    layers
        .into_iter()
        .map(|path| LoraArg { path, scale: 1.0 })
        .chain(given.iter().cloned())
        .collect()
}

/// Reads every adapter of `loras` (a LoRA GGUF, or a PEFT directory read for a model of
/// `cfg`), each with its scale.
pub fn open_all(loras: &[LoraArg], cfg: &ModelConfig) -> Result<Vec<(LoraAdapter, f32)>, CliError> {
    loras
        .iter()
        .map(|l| {
            let adapter = LoraAdapter::open_for(&l.path, cfg).map_err(ModelError::from)?;
            Ok((adapter, l.scale))
        })
        .collect()
}

/// Reads every adapter of `loras` ([`open_all`]) and applies them together to `model` (each
/// checked against it first: an adapter of another model is an error naming the file and
/// tensor).
pub fn apply<B: Backend>(model: &mut Model<B>, loras: &[LoraArg]) -> Result<(), CliError> {
    if loras.is_empty() {
        return Ok(());
    }
    let adapters = open_all(loras, model.config())?;
    let refs: Vec<(&LoraAdapter, f32)> = adapters.iter().map(|(a, s)| (a, *s)).collect();
    model.apply_loras(&refs)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_and_scale() {
        let arg = |s: &str| s.parse::<LoraArg>();
        let lora = |path: &str, scale| LoraArg {
            path: path.into(),
            scale,
        };
        assert_eq!(arg("a.gguf"), Ok(lora("a.gguf", 1.0)));
        assert_eq!(arg("a.gguf:0.5"), Ok(lora("a.gguf", 0.5)));
        assert_eq!(arg("dir/a.gguf:-2"), Ok(lora("dir/a.gguf", -2.0)));
        assert_eq!(arg("c:/x/a.gguf"), Ok(lora("c:/x/a.gguf", 1.0)));
        assert_eq!(arg("a:2:1"), Ok(lora("a:2", 1.0)));
        assert!(arg(":0.5").is_err());
        assert!(arg("a.gguf:inf").is_err());
        assert!(arg("a.gguf:NaN").is_err());
    }
}
