//! Which engine trains (`--backend`): the GPU tape, or the CPU tape in f64.

use std::path::Path;
use std::sync::Arc;

use rullama_finetune::engine::TrainBackend;
use rullama_finetune::gpu::GpuTapeBackend;
use rullama_finetune::lora::LoraSpec;
use rullama_finetune::tape::TapeBackend;
use rullama_finetune::train::{TrainConfig, Trainer, attach};
use rullama_kernels::Gpu;
use rullama_model::Model;

use super::super::CliError;
use super::Args;

/// The loaded model, on whichever executor trains it (the trainer borrows it).
#[derive(Default)]
pub struct Models {
    cpu: Option<Model<TapeBackend>>,
    gpu: Option<Model<GpuTapeBackend>>,
}

/// Loads the model at `path` on `gpu` (or the CPU tape), attaches an adapter of `spec` and
/// starts a trainer of `config`; with a line naming the executor.
pub fn start<'m>(
    models: &'m mut Models,
    gpu: Option<Gpu>,
    path: &Path,
    args: &Args,
    spec: &LoraSpec,
    config: TrainConfig,
) -> Result<(Trainer<'m>, String), CliError> {
    match gpu {
        Some(gpu) => {
            let cores = !args.no_tensor_cores && gpu.caps.coop_f16;
            let name = format!(
                "{} ({})",
                gpu.info.name,
                if cores {
                    "tensor cores"
                } else {
                    "f32 products"
                }
            );
            let backend = GpuTapeBackend::new(Arc::new(gpu), !args.no_tensor_cores);
            let trainer = trainer_on(&mut models.gpu, path, backend, spec, config, args.ctx)?;
            Ok((trainer, name))
        }
        None => {
            let trainer = trainer_on(
                &mut models.cpu,
                path,
                TapeBackend::new(),
                spec,
                config,
                args.ctx,
            )?;
            Ok((trainer, "cpu (the f64 training tape)".to_string()))
        }
    }
}

fn trainer_on<'m, B: TrainBackend>(
    slot: &'m mut Option<Model<B>>,
    path: &Path,
    backend: B,
    spec: &LoraSpec,
    config: TrainConfig,
    n_ctx: usize,
) -> Result<Trainer<'m>, CliError> {
    let model = slot.insert(Model::open(path, backend)?);
    let lora = attach(model, spec.clone())?;
    let model: &'m Model<B> = model;
    Ok(Trainer::new(model, lora, config, n_ctx)?)
}
