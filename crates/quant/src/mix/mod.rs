//! Which GGML type each tensor of a model gets in a `llama-quantize` file type: llama.cpp's
//! `llama_tensor_get_type` (`src/llama-quant.cpp`) without an importance matrix or overrides.
//!
//! - Only matrices are quantized: 1-D tensors (norms, biases), norms of any shape, position
//!   embeddings and a few small or special matrices keep their type.
//! - The F32, F16 and BF16 file types turn every other matrix into that type, nothing more.
//! - The quantized ones start every matrix from their block type ([`FileType::default_type`])
//!   and then apply the mix: the LM head (and the token embedding when it is the LM head) Q6_K
//!   (Q8_0 in Q8_0 files, or where its rows are not whole blocks); attn_v, ffn_down and
//!   attn_output get more bits in the `_M`/`_L` mixes and in some layers
//!   (`use_more_bits`: the first and last eighth and every third layer between); see
//!   `docs/FORMATS.md` for the table.
//! - Last, a row that is not a whole number of the chosen type's blocks falls back to a
//!   32-weight format (Q4_K to Q5_0, Q6_K to Q8_0, ...), or F16 when 32 does not divide it.
//!
//! Layer positions are llama.cpp's counters, taken in its tensor order (by layer, then name),
//! so a model whose layers lack some tensors gets what llama-quantize gives it.
//!
//! ```
//! use rullama_gguf::GgmlType;
//! use rullama_quant::mix::{FileType, ModelFacts, MixTensor, tensor_types};
//!
//! let facts = ModelFacts { arch: "llama".into(), n_layer: 1, n_head: 8, n_head_kv: 8, n_expert: 0 };
//! let tensors = [
//!     MixTensor { name: "blk.0.attn_v.weight", dims: &[512, 512], ggml_type: GgmlType::F32 },
//!     MixTensor { name: "blk.0.attn_norm.weight", dims: &[512], ggml_type: GgmlType::F32 },
//!     MixTensor { name: "output.weight", dims: &[512, 1000], ggml_type: GgmlType::F32 },
//! ];
//! let types = tensor_types(FileType::Q4KM, &facts, &tensors)?;
//! assert_eq!(types, [GgmlType::Q6K, GgmlType::F32, GgmlType::Q6K]);
//! # Ok::<(), rullama_quant::mix::MixError>(())
//! ```

mod file_type;
mod rule;

use rullama_gguf::{GgmlType, GgufError, Metadata, Value};

pub use file_type::FileType;
use rule::{Category, Context};

/// What the mixes read about a model besides its tensors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelFacts {
    /// `general.architecture` (Falcon has rules of its own).
    pub arch: String,
    /// `{arch}.block_count`: the count the FFN rules divide.
    pub n_layer: usize,
    /// Attention heads of the first layer (0 if the model has none).
    pub n_head: usize,
    /// KV heads of the first layer.
    pub n_head_kv: usize,
    /// `{arch}.expert_count` (0 for a dense model).
    pub n_expert: usize,
}

/// The first value of a key that is a number or an array of numbers (per-layer head counts).
fn first_usize(meta: &Metadata, key: &str) -> Result<Option<usize>, GgufError> {
    match meta.get(key) {
        None => Ok(None),
        Some(Value::Array(_)) => Ok(meta.get_usize_array(key)?.first().copied()),
        Some(_) => meta.get_usize(key).map(Some),
    }
}

impl ModelFacts {
    /// The facts of the model whose metadata is `meta`: the architecture and its block count
    /// are required (as llama.cpp's loader requires them); head counts default as llama.cpp
    /// defaults them (KV heads to heads), experts to none.
    pub fn from_metadata(meta: &Metadata) -> Result<ModelFacts, GgufError> {
        let arch = meta.architecture()?.to_string();
        let key = |suffix: &str| format!("{arch}.{suffix}");
        let n_layer = meta.get_usize(&key("block_count"))?;
        let n_head = first_usize(meta, &key("attention.head_count"))?.unwrap_or(0);
        let n_head_kv = first_usize(meta, &key("attention.head_count_kv"))?.unwrap_or(n_head);
        let n_expert = first_usize(meta, &key("expert_count"))?.unwrap_or(0);
        Ok(ModelFacts {
            arch,
            n_layer,
            n_head,
            n_head_kv,
            n_expert,
        })
    }

    fn context(&self, tied: bool) -> Context<'_> {
        Context {
            arch: &self.arch,
            n_gqa: self.n_head.checked_div(self.n_head_kv).unwrap_or(0),
            n_expert: self.n_expert,
            is_70b: self.arch == "llama" && self.n_layer == 80 && self.n_head != self.n_head_kv,
            tied,
        }
    }
}

/// One tensor as the mixes see it.
#[derive(Debug, Clone, Copy)]
pub struct MixTensor<'a> {
    /// Its GGUF name.
    pub name: &'a str,
    /// GGML order: `dims[0]` is the row length.
    pub dims: &'a [u64],
    /// Its type now (what a tensor that is never quantized keeps).
    pub ggml_type: GgmlType,
}

/// A tensor the mix cannot type, as llama-quantize refuses it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MixError {
    /// Rows that are not whole blocks of a type without a fallback (Q8_0, Q4_0, ...).
    #[error(
        "tensor {tensor}: rows of {n_cols} values are not whole {ggml_type} blocks, and \
         llama-quantize defines no fallback for {ggml_type}"
    )]
    NoFallback {
        /// The tensor.
        tensor: String,
        /// The type its rows do not fit.
        ggml_type: GgmlType,
        /// Its row length.
        n_cols: u64,
    },
    /// An expert model's FFN tensor whose name gives no layer below the block count.
    #[error("tensor {tensor}: no layer below {n_layer} in its name (blk.N.)")]
    NoLayer {
        /// The tensor.
        tensor: String,
        /// The model's block count.
        n_layer: usize,
    },
}

/// The `N` of a `blk.N.` name, as llama.cpp's `sscanf(name, "blk.%d.")` reads it.
fn layer_of(name: &str) -> Option<i64> {
    let rest = name.strip_prefix("blk.")?;
    let end = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    rest[..end].parse().ok()
}

/// The order llama.cpp's loader keeps tensors in (`weight_name_comparer`), which is the order
/// llama-quantize writes them and counts layers in: tensors outside the blocks first, then
/// by layer, each group by name. Returns indices into `names`.
pub fn llama_order<S: AsRef<str>>(names: &[S]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..names.len()).collect();
    order.sort_by_key(|&i| (layer_of(names[i].as_ref()).unwrap_or(-1), names[i].as_ref()));
    order
}

/// The type of every tensor of `tensors` (in the same order) in file type `ftype`.
pub fn tensor_types(
    ftype: FileType,
    facts: &ModelFacts,
    tensors: &[MixTensor<'_>],
) -> Result<Vec<GgmlType>, MixError> {
    let cats: Vec<Category> = tensors.iter().map(|t| Category::of(t.name)).collect();
    let n_attn_v = cats.iter().filter(|c| c.is_attn_v()).count();
    let cx = facts.context(!cats.contains(&Category::Output));
    let default = ftype.default_type();
    // The counters run in llama.cpp's tensor order.
    let names: Vec<&str> = tensors.iter().map(|t| t.name).collect();
    let order = llama_order(&names);
    let (mut i_attn_v, mut i_ffn) = (0, [0usize; 3]);
    let mut types = vec![GgmlType::F32; tensors.len()];
    for i in order {
        let (t, cat) = (&tensors[i], cats[i]);
        types[i] = t.ggml_type;
        if !rule::allows_quantization(t.name, t.dims) {
            continue;
        }
        // F32, F16 and BF16 files: every matrix in that type, no mix, no fallback.
        if default.layout().block_size == 1 {
            types[i] = default;
            continue;
        }
        let ffn = [Category::FfnDown, Category::FfnGate, Category::FfnUp]
            .iter()
            .position(|&c| c == cat);
        let lm_head = cat == Category::Output || (cx.tied && cat == Category::TokenEmbd);
        let layer = if lm_head {
            (0, 0)
        } else if cat.is_attn_v() {
            i_attn_v += 1;
            (i_attn_v - 1, n_attn_v)
        } else if let Some(k) = ffn {
            i_ffn[k] += 1;
            let counted = i_ffn[k] - 1;
            // Experts are not one tensor a layer: the name tells the layer.
            let i_layer = if facts.n_expert > 1 {
                layer_of(t.name)
                    .and_then(|l| usize::try_from(l).ok())
                    .filter(|&l| l < facts.n_layer)
                    .ok_or_else(|| MixError::NoLayer {
                        tensor: t.name.to_string(),
                        n_layer: facts.n_layer,
                    })?
            } else {
                counted
            };
            (i_layer, facts.n_layer)
        } else {
            (0, 0)
        };
        let n_cols = t.dims.first().copied().unwrap_or(1);
        let chosen = rule::mix_type(ftype, default, cat, n_cols, layer, cx);
        types[i] = rule::fallback(chosen, n_cols).ok_or_else(|| MixError::NoFallback {
            tensor: t.name.to_string(),
            ggml_type: chosen,
            n_cols,
        })?;
    }
    Ok(types)
}
