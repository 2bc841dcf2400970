//! What a run writes at each save: the adapter (llama.cpp's GGUF, and PEFT's directory if
//! asked), the checkpoint and the loss curve.

use std::path::Path;

use rullama_finetune::checkpoint;
use rullama_finetune::data::Position;
use rullama_finetune::lora::LoraSpec;
use rullama_finetune::train::Trainer;
use rullama_model::lora::peft::{self, PeftOptions};
use rullama_model::{LoraAdapter, ModelConfig};

use super::super::CliError;
use super::plot;
use super::progress::Progress;

/// Where the run writes: the adapter (and its PEFT form), the checkpoint and the loss curve.
pub struct Outputs<'a> {
    /// The base's fingerprint, recorded in the GGUF adapter.
    pub base: u64,
    /// The adapter's file.
    pub out: &'a Path,
    /// The PEFT directory, if asked.
    pub peft: Option<&'a Path>,
    /// The model's hyper-parameters.
    pub cfg: &'a ModelConfig,
    /// The adapter's shape.
    pub spec: &'a LoraSpec,
}

impl Outputs<'_> {
    /// The adapter (llama.cpp's GGUF, and PEFT's directory if asked), the checkpoint and the
    /// loss curve of the steps logged so far, each whole or not at all. A curve that cannot
    /// be drawn is a warning: the adapter is what the run is for.
    pub fn save(
        &self,
        trainer: &Trainer<'_>,
        position: Position,
        progress: &Progress,
    ) -> Result<(), CliError> {
        let pairs = trainer.lora().to_pairs(&trainer.params()?);
        let arch = self.cfg.arch.name();
        let label = self.out.display().to_string();
        if let Some(dir) = self.peft {
            let adapter = LoraAdapter::from_pairs(&label, arch, self.spec.alpha, pairs.clone())?;
            let options = PeftOptions {
                use_rslora: self.spec.rslora,
                lora_dropout: self.spec.dropout,
                ..PeftOptions::default()
            };
            peft::write(dir, &adapter, self.cfg, &options)?;
        }
        // llama.cpp scales by alpha / rank and has no rsLoRA flag: an rsLoRA adapter
        // carries the alpha that gives its factor alpha / sqrt(rank).
        let r = self.spec.rank as f32;
        let alpha = if self.spec.rslora {
            self.spec.alpha * r.sqrt()
        } else {
            self.spec.alpha
        };
        let adapter = LoraAdapter::from_pairs(&label, arch, alpha, pairs)?.with_base(self.base);
        let mut w = adapter.to_gguf()?;
        w.set("general.name", "rullama finetune");
        w.write_to_path(self.out)?;
        checkpoint::save(&checkpoint::path_for(self.out), trainer, position)?;
        if let Err(e) = plot::write_for(self.out, progress.log_path()) {
            progress.warn(&format!("warning: the loss curve was not written: {e}"));
        }
        Ok(())
    }
}
