//! The training tape on the GPU: the model's own graph recorded, then run forward, through
//! the loss and backward as one built step of kernels, with AdamW as a second.
//!
//! [`GpuTapeBackend`] is an executor of `rullama-model` like the CPU tape
//! ([`crate::tape`]): the architecture files run unchanged over its [`GpuTape`], which only
//! records each op (a node, with its output's shape). The trainer's engine
//! (`engine.rs`) then lowers the recording into kernels (`plan/`): the forward with
//! `attention_train` (cache-free, keeping each row's log-sum-exp), the LM head and the
//! cross-entropy in chunks of rows (never a `[tokens × vocab]` buffer for the whole step),
//! and the backward walked in reverse over the same nodes, each op's backward kernel reading
//! what its forward kept (the capture buffers). A buffer is handed back to the plan's pool
//! after its last reader, forward or backward, so a step holds what the backward still needs
//! and no more. The frozen weights stay in their file formats; the adapter's matrices are
//! f32 buffers that AdamW updates in place.
//!
//! A model's graph is a function of the step's token count, so a built step is kept per
//! count and replayed: after the first step of a shape, a training step creates nothing on
//! the device and uploads only its token ids, positions and targets.

mod engine;
mod plan;
mod record;

use std::sync::Arc;

use rullama_gguf::TensorView;
use rullama_kernels::{Gpu, GpuError, GpuFormat, GpuTensor, GpuWeight, WeightShape};
use rullama_model::backend::KvCacheSpec;
use rullama_model::{Backend, ModelError, Result};
use rullama_quant::{Format, FormatOps};

pub use record::{GpuIds, GpuTape, GpuValue};

/// The most bytes of logits the loss head holds at once by default: 256 rows of Gemma 3's
/// 262,144-word vocabulary.
const DEFAULT_HEAD_CHUNK_BYTES: usize = 256 << 20;

/// A weight on the GPU tape's executor; cloning shares it.
#[derive(Debug, Clone)]
pub enum GpuTapeWeight {
    /// A matrix of the model, frozen, in its file format.
    Matrix(Arc<GpuWeight>),
    /// A vector of the model (a norm's gain, a bias), frozen, as f32.
    Vector(Arc<GpuTensor>),
    /// Trainable matrix `id` of the engine's parameters, multiplied by `scale` where it is
    /// used (LoRA's `alpha / rank` on `B`).
    Param {
        /// Index into the parameters.
        id: usize,
        /// The factor the graph's product applies.
        scale: f32,
        /// LoRA dropout's probability on the product's input, in training steps.
        dropout: f32,
    },
}

/// The GPU tape's executor: the model's weights uploaded as the file has them.
#[derive(Debug, Clone)]
pub struct GpuTapeBackend {
    gpu: Arc<Gpu>,
    tensor_cores: bool,
    head_chunk_bytes: usize,
    step_bytes_limit: Option<u64>,
    weight_bytes: u64,
}

impl GpuTapeBackend {
    /// The executor on `gpu`. `tensor_cores`: the frozen weights' products (forward and
    /// input gradients) and the training attention (head dims 64, 128, 256) run on the tensor
    /// cores where the device has them (f16 inputs, f32 sums); `false` keeps every product in
    /// f32.
    pub fn new(gpu: Arc<Gpu>, tensor_cores: bool) -> GpuTapeBackend {
        GpuTapeBackend {
            gpu,
            tensor_cores,
            head_chunk_bytes: DEFAULT_HEAD_CHUNK_BYTES,
            step_bytes_limit: None,
            weight_bytes: 0,
        }
    }

    /// Holds a step's buffers (activations, captures, scratches) to `bytes`: a step that needs
    /// more is [`crate::FinetuneError::StepTooLarge`], as one past the device's free memory
    /// is — for a GPU shared with other work (and for the tests of that error).
    pub fn with_step_bytes_limit(mut self, bytes: u64) -> GpuTapeBackend {
        self.step_bytes_limit = Some(bytes);
        self
    }

    /// The limit [`GpuTapeBackend::with_step_bytes_limit`] set.
    pub fn step_bytes_limit(&self) -> Option<u64> {
        self.step_bytes_limit
    }

    /// Runs the LM head and the loss over at most `bytes` of logits at a time (at least one
    /// row; 256 MiB unless set): less memory for a step, in more and smaller products.
    pub fn with_head_chunk_bytes(mut self, bytes: usize) -> GpuTapeBackend {
        self.head_chunk_bytes = bytes;
        self
    }

    /// Bytes of the model's weights on the device.
    pub fn weight_bytes(&self) -> u64 {
        self.weight_bytes
    }

    /// The device.
    pub fn gpu(&self) -> &Arc<Gpu> {
        &self.gpu
    }
}

/// A GPU error as the model's, with what was being done.
pub(crate) fn gpu_err(context: impl Into<String>) -> impl FnOnce(GpuError) -> ModelError {
    move |source| ModelError::Gpu {
        context: context.into(),
        source: Box::new(source),
    }
}

impl Backend for GpuTapeBackend {
    type Weight = GpuTapeWeight;
    type Sequence = GpuTape;

    fn load_weight(&mut self, view: TensorView<'_>) -> Result<GpuTapeWeight> {
        let name = &view.info.name;
        let dims = &view.info.dims;
        let format = Format::Ggml(view.info.ggml_type);
        if dims.iter().skip(1).all(|&d| d == 1) {
            let err = |source| ModelError::Weight {
                name: name.clone(),
                source,
            };
            let ops = FormatOps::of(format).map_err(err)?;
            let mut v = vec![0f32; view.info.n_elements as usize];
            ops.dequantize(view.data, &mut v).map_err(err)?;
            let t = GpuTensor::from_f32(&self.gpu, &[v.len()], &v);
            self.weight_bytes += t.bytes();
            return Ok(GpuTapeWeight::Vector(Arc::new(t)));
        }
        if dims.len() > 2 && dims[2..].iter().any(|&d| d != 1) {
            return Err(ModelError::Unsupported(format!(
                "tensor `{name}` with dims {dims:?} on the GPU training tape"
            )));
        }
        let shape = WeightShape {
            format: GpuFormat::try_from(format).map_err(gpu_err(format!("tensor `{name}`")))?,
            n_in: dims[0] as usize,
            n_out: dims[1] as usize,
        };
        let w = GpuWeight::upload(&self.gpu, shape, view.data)
            .map_err(gpu_err(format!("uploading tensor `{name}`")))?;
        self.weight_bytes += w.bytes();
        Ok(GpuTapeWeight::Matrix(Arc::new(w)))
    }

    /// A tape keeps no KV cache: each step attends within itself.
    fn new_sequence(&self, _spec: &KvCacheSpec) -> Result<GpuTape> {
        Ok(GpuTape::new(
            Arc::clone(&self.gpu),
            self.tensor_cores,
            self.head_chunk_bytes,
        ))
    }

    fn max_activation_bytes(&self) -> Option<u64> {
        Some(self.gpu.max_binding_bytes())
    }
}
