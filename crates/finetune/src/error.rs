//! What can go wrong when training, beyond the data's own errors ([`crate::data::DataError`]).

/// A training run that cannot start or go on.
#[derive(Debug, thiserror::Error)]
pub enum FinetuneError {
    /// A LoRA rank of 0.
    #[error("LoRA rank must be at least 1, got {0}")]
    Rank(usize),
    /// An alpha that is not a positive number.
    #[error("LoRA alpha must be a positive number, got {0}")]
    Alpha(f32),
    /// A dropout outside `[0, 1)`.
    #[error("LoRA dropout must lie in [0, 1), got {0}")]
    Dropout(f32),
    /// No target projection.
    #[error("no LoRA target: name at least one of q, k, v, o, gate, up, down")]
    NoTargets,
    /// A target name that is none of the seven projections.
    #[error(
        "unknown LoRA target `{0}`: expected q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj or down_proj (or attn_q … ffn_down)"
    )]
    UnknownTarget(String),
    /// A target the model has no projection of.
    #[error("the model has no `{0}` projection to adapt")]
    TargetNotInModel(String),
    /// A batch with no token to learn.
    #[error("the batch has no trainable token: nothing to learn from")]
    NothingToLearn,
    /// A training step too large for the GPU: a buffer past its largest binding, or past
    /// its free memory (or the limit set for the step's buffers).
    #[error(
        "a training step of {tokens} tokens does not fit the GPU: {what}; {}",
        fit_hint(fits)
    )]
    StepTooLarge {
        /// The step's tokens (its examples together).
        tokens: usize,
        /// What did not fit.
        what: String,
        /// The largest step found to fit, where the engine searched for one.
        fits: Option<Fit>,
    },
    /// Optimizer steps whose gradient was not finite, [`crate::train::MAX_SKIPPED_IN_A_ROW`]
    /// of them in a row: none was applied, so the adapter and AdamW's state are those of the
    /// last step that was.
    #[error(
        "training stopped at step {step}: the gradient was not finite (NaN or infinite) {in_a_row} \
         times in a row, and no such step was applied, so the adapter is as after step {}; \
         an overflow this persistent is no unlucky batch: the GPU's products in f32 \
         (--no-tensor-cores) or a lower --lr may avoid it",
        step - 1
    )]
    NonFiniteGradient {
        /// The step that could not be taken (the steps applied before it, plus one).
        step: u64,
        /// Consecutive steps skipped, this one included.
        in_a_row: u32,
    },
    /// A checkpoint that cannot be read or does not belong to this run.
    #[error("checkpoint {}: {what}", path.display())]
    Checkpoint {
        /// The checkpoint's file.
        path: std::path::PathBuf,
        /// What is wrong.
        what: String,
    },
    /// A file that could not be written.
    #[error("writing {}: {source}", path.display())]
    Write {
        /// The file.
        path: std::path::PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// The model or its executor failed (boxed, as the next: every result of the crate
    /// would otherwise be as large as the largest error).
    #[error(transparent)]
    Model(Box<rullama_model::ModelError>),
    /// The data failed.
    #[error(transparent)]
    Data(Box<crate::data::DataError>),
}

impl From<rullama_model::ModelError> for FinetuneError {
    fn from(e: rullama_model::ModelError) -> Self {
        FinetuneError::Model(Box::new(e))
    }
}

impl From<crate::data::DataError> for FinetuneError {
    fn from(e: crate::data::DataError) -> Self {
        FinetuneError::Data(Box::new(e))
    }
}

/// A result of this crate.
pub type Result<T, E = FinetuneError> = std::result::Result<T, E>;

/// A step that fits the GPU where a larger one did not: its tokens, and the context its
/// sequences were cut to (what the hint turns into `--batch` and `--ctx`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fit {
    /// The step's tokens.
    pub tokens: usize,
    /// The training context.
    pub ctx: usize,
}

/// What to lower, from the step found to fit (if any).
fn fit_hint(fits: &Option<Fit>) -> String {
    const KEEP: &str = "--grad-accum keeps the effective batch";
    match fits {
        Some(f) if f.tokens >= f.ctx => format!(
            "a step of {} tokens fits: --batch {} at --ctx {} ({KEEP})",
            f.tokens,
            f.tokens / f.ctx,
            f.ctx
        ),
        Some(f) => format!(
            "a step of {} tokens fits: --batch 1 at --ctx {} ({KEEP})",
            f.tokens, f.tokens
        ),
        None => format!("lower --batch or --ctx ({KEEP})"),
    }
}
