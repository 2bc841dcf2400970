//! The tape's weights: the model's frozen tensors, dequantized, and the trainable matrices.

use std::sync::Arc;

use rullama_gguf::TensorView;
use rullama_model::{ModelError, Result};
use rullama_quant::{Format, FormatOps};

/// A weight on the tape's executor; cloning shares it.
#[derive(Debug, Clone)]
pub enum TapeWeight {
    /// A tensor of the model, frozen: its values dequantized to f32 (exact for every block
    /// format), `n_out` rows of `n_in` (a 1-D tensor: one row).
    Frozen(Arc<Frozen>),
    /// Trainable matrix `id` of the tape's parameters, multiplied by `scale` wherever it is
    /// used (LoRA's `alpha / rank` on `B`, so the parameter itself is PEFT's `B`).
    Param {
        /// Index into the tape's parameters.
        id: usize,
        /// The factor the graph's product applies.
        scale: f64,
        /// PEFT's `lora_dropout`: in a training step (a dropout seed set on the tape) each
        /// input of the product is zeroed with this probability and the rest scaled by
        /// `1 / (1 - dropout)`; 0 for none.
        dropout: f64,
    },
}

/// A frozen tensor's values.
#[derive(Debug)]
pub struct Frozen {
    /// Values per row (GGML's first dim).
    pub n_in: usize,
    /// Rows (1 for a vector).
    pub n_out: usize,
    /// `n_out * n_in` values.
    pub data: Vec<f32>,
}

impl Frozen {
    /// Row `r`.
    pub fn row(&self, r: usize) -> &[f32] {
        &self.data[r * self.n_in..(r + 1) * self.n_in]
    }
}

impl TapeWeight {
    /// A tensor of the file, dequantized.
    pub fn from_view(view: TensorView<'_>) -> Result<TapeWeight> {
        let name = &view.info.name;
        let err = |source| ModelError::Weight {
            name: name.clone(),
            source,
        };
        let ops = FormatOps::of(Format::Ggml(view.info.ggml_type)).map_err(err)?;
        let dims = &view.info.dims;
        if dims.len() > 2 && dims[2..].iter().any(|&d| d != 1) {
            return Err(ModelError::Unsupported(format!(
                "tensor `{name}` with dims {dims:?} on the training tape"
            )));
        }
        let n_in = dims.first().copied().unwrap_or(1) as usize;
        let n_out = dims.get(1).copied().unwrap_or(1) as usize;
        let mut data = vec![0f32; n_in * n_out];
        ops.dequantize(view.data, &mut data).map_err(err)?;
        Ok(TapeWeight::Frozen(Arc::new(Frozen { n_in, n_out, data })))
    }

    /// The frozen tensor; a parameter where the graph wants a frozen one (a norm's gain) is
    /// a bug of the caller.
    pub(crate) fn frozen(&self) -> &Frozen {
        match self {
            TapeWeight::Frozen(f) => f,
            TapeWeight::Param { id, .. } => {
                panic!("parameter {id} used where the graph reads a frozen tensor")
            }
        }
    }
}
