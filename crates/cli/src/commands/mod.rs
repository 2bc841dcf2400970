//! One module per subcommand.

pub mod bench;
pub mod chat;
pub mod generation;
pub mod inspect;
pub mod perplexity;
pub mod run;
pub mod tokenize;

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
    Model(#[from] rullama_model::ModelError),
    #[error(transparent)]
    Gpu(#[from] rullama_kernels::GpuError),
    #[error(transparent)]
    Sampler(#[from] rullama_model::sampler::SamplerError),
    #[error("{0}")]
    Usage(String),
    #[error("reading input or writing output: {0}")]
    Output(#[from] std::io::Error),
    #[error("encoding JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// Ctrl-C ended the command: exit status 130, as a shell reports SIGINT, and no message.
    #[error("interrupted")]
    Interrupted,
}
