//! One module per subcommand.

pub mod inspect;

/// Errors a command reports to the user; each names what it was working on.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error(transparent)]
    Store(#[from] rullama_gguf::store::StoreError),
    #[error(transparent)]
    Gguf(#[from] rullama_gguf::GgufError),
    #[error("writing output: {0}")]
    Output(#[from] std::io::Error),
    #[error("encoding JSON: {0}")]
    Json(#[from] serde_json::Error),
}
