//! What can be wrong with a LoRA adapter, each error naming the adapter's file (or the label
//! it was read under) and the tensor or key at fault.

use rullama_gguf::GgufError;
use rullama_quant::QuantError;

/// A LoRA adapter that cannot be read, or that does not fit the model it is applied to.
#[derive(Debug, thiserror::Error)]
pub enum LoraError {
    /// The file could not be read at all.
    #[error("LoRA adapter {file}: {source}")]
    Io {
        /// The adapter's file.
        file: String,
        /// What the system said.
        source: std::io::Error,
    },

    /// A merged model that could not be written.
    #[error("writing {file}: {source}")]
    Write {
        /// The file being written.
        file: String,
        /// What the system said.
        source: std::io::Error,
    },

    /// A PEFT adapter's destination that exists as something else than a directory.
    #[error("cannot write a PEFT adapter to {path}: it exists and is not a directory")]
    NotADirectory {
        /// The destination.
        path: String,
    },

    /// The bytes are not a GGUF file this crate can parse (truncated, bad magic, a key of the
    /// wrong type).
    #[error("LoRA adapter {file}: {source}")]
    Gguf {
        /// The adapter's file.
        file: String,
        /// What the parser said.
        source: GgufError,
    },

    /// `general.type` is not `adapter`: a model, or a file of something else.
    #[error("{file} is not an adapter: general.type is {found}, expected `adapter`")]
    NotAnAdapter {
        /// The file.
        file: String,
        /// The value found (quoted), or `absent`.
        found: String,
    },

    /// `adapter.type` is not `lora` (a control vector, say).
    #[error("{file} is not a LoRA adapter: adapter.type is {found}, expected `lora`")]
    NotLora {
        /// The file.
        file: String,
        /// The value found (quoted), or `absent`.
        found: String,
    },

    /// The adapter was made for another architecture than the model's.
    #[error("LoRA adapter {file} is for architecture `{adapter}`, the model is `{model}`")]
    Architecture {
        /// The adapter's file.
        file: String,
        /// Its `general.architecture`.
        adapter: String,
        /// The model's.
        model: String,
    },

    /// The adapter records the base it was trained on, and the model is another one (of the
    /// same architecture and shapes, or it would have failed those checks first).
    #[error(
        "LoRA adapter {file} was trained on another model: its base's fingerprint is {adapter:016x}, this model's {model:016x} (hyper-parameters or tokenizer differ)"
    )]
    OtherBase {
        /// The adapter's file.
        file: String,
        /// The fingerprint it records.
        adapter: u64,
        /// The model's.
        model: u64,
    },

    /// A value of the adapter's own metadata that makes no sense (a NaN alpha, a rank of 0).
    #[error("LoRA adapter {file}: {what}")]
    Invalid {
        /// The adapter's file.
        file: String,
        /// What is wrong, naming the key or tensor.
        what: String,
    },

    /// A tensor whose name is neither `<base>.lora_a` nor `<base>.lora_b`.
    #[error("LoRA adapter {file}: tensor `{tensor}` is neither a `.lora_a` nor a `.lora_b`")]
    UnexpectedTensor {
        /// The adapter's file.
        file: String,
        /// The tensor.
        tensor: String,
    },

    /// A tensor this crate cannot apply (a PEFT tensor of another module, the embedding, the
    /// LM head; a dtype without a reader).
    #[error("LoRA adapter {file}: tensor `{tensor}`: {why}")]
    UnsupportedTensor {
        /// The adapter's file.
        file: String,
        /// The tensor (or the PEFT module).
        tensor: String,
        /// Why it cannot be applied.
        why: String,
    },

    /// One half of a pair without the other.
    #[error("LoRA adapter {file}: `{base}` has a `{present}` but no `{missing}`")]
    MissingHalf {
        /// The adapter's file.
        file: String,
        /// The base tensor the pair is for.
        base: String,
        /// The half present (`lora_a` or `lora_b`).
        present: &'static str,
        /// The half missing.
        missing: &'static str,
    },

    /// A pair for a tensor the model does not have (an adapter of another model).
    #[error("LoRA adapter {file}: the model has no tensor `{base}` (an adapter of another model?)")]
    UnknownTensor {
        /// The adapter's file.
        file: String,
        /// The base tensor named by the pair.
        base: String,
    },

    /// A pair for a tensor the model has but that the graph does not multiply through a
    /// projection (the token embedding, a norm gain, a tied LM head).
    #[error("LoRA adapter {file}: `{base}` is not a projection LoRA applies to here")]
    NotAProjection {
        /// The adapter's file.
        file: String,
        /// The base tensor.
        base: String,
    },

    /// A tensor of a shape that does not fit its pair or the model's tensor. Dimensions in
    /// GGML order: `lora_a` is `[n_in, rank]`, `lora_b` `[rank, n_out]`.
    #[error("LoRA adapter {file}: tensor `{tensor}` has shape {found:?}, expected {expected:?}")]
    Shape {
        /// The adapter's file.
        file: String,
        /// The adapter's tensor.
        tensor: String,
        /// The shape the model (or the other half of the pair) implies.
        expected: Vec<u64>,
        /// The shape the file has.
        found: Vec<u64>,
    },

    /// A tensor whose type has no decoder.
    #[error("LoRA adapter {file}: tensor `{tensor}`: {source}")]
    Weight {
        /// The adapter's file.
        file: String,
        /// The adapter's tensor.
        tensor: String,
        /// What the block formats said.
        source: QuantError,
    },

    /// A user scale that is not a finite number.
    #[error("LoRA adapter {file}: scale {scale} is not a finite number")]
    Scale {
        /// The adapter's file.
        file: String,
        /// The scale asked for.
        scale: f32,
    },
}
