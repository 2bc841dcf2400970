//! One module per subcommand.

pub mod bench;
pub mod chat;
pub mod finetune;
pub mod generation;
pub mod inspect;
pub mod lora;
pub mod merge;
pub mod perplexity;
pub mod quantize;
pub mod run;
pub mod tokenize;
pub mod validate;

/// Errors a command reports to the user; each names what it was working on.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error(transparent)]
    Store(#[from] rullama_gguf::store::StoreError),
    #[error(transparent)]
    Gguf(#[from] rullama_gguf::GgufError),
    #[error(transparent)]
    Tokenizer(#[from] rullama_tokenizer::TokenizerError),
    #[error(transparent)]
    Model(rullama_model::ModelError),
    /// A flag's value outside its range (`rullama_model::validate`), named as the flag.
    #[error("{} {} is out of range: it takes {}", validate::flag(.0.param), .0.value, .0.param.range())]
    InvalidFlag(rullama_model::validate::InvalidParam),
    #[error(transparent)]
    Gpu(#[from] rullama_kernels::GpuError),
    #[error(transparent)]
    Sampler(#[from] rullama_model::sampler::SamplerError),
    #[error("{0}")]
    Usage(String),
    #[error("reading input or writing output: {0}")]
    Output(#[from] std::io::Error),
    #[error(transparent)]
    Quantize(#[from] quantize::QuantizeError),
    /// Boxed: the data's errors carry a line's text, and every command's result would
    /// otherwise be that large.
    #[error(transparent)]
    Finetune(Box<rullama_finetune::FinetuneError>),
    #[error(transparent)]
    Lora(#[from] rullama_model::LoraError),
    #[error("encoding JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// Ctrl-C ended the command: exit status 130, as a shell reports SIGINT, and no message.
    #[error("interrupted")]
    Interrupted,
}

impl From<rullama_finetune::FinetuneError> for CliError {
    fn from(e: rullama_finetune::FinetuneError) -> Self {
        CliError::Finetune(Box::new(e))
    }
}

/// A dataset's error is a fine-tuning run's (`rullama_finetune::FinetuneError::Data`).
impl From<rullama_finetune::data::DataError> for CliError {
    fn from(e: rullama_finetune::data::DataError) -> Self {
        rullama_finetune::FinetuneError::from(e).into()
    }
}

impl From<rullama_model::ModelError> for CliError {
    fn from(e: rullama_model::ModelError) -> Self {
        match e {
            rullama_model::ModelError::InvalidParam(p) => CliError::InvalidFlag(p),
            e => CliError::Model(e),
        }
    }
}

impl From<rullama_model::validate::InvalidParam> for CliError {
    fn from(p: rullama_model::validate::InvalidParam) -> Self {
        CliError::InvalidFlag(p)
    }
}
