//! What can go wrong when drawing a token: only degenerate logits, never the parameters
//! (every parameter value has a defined meaning, as in llama.cpp).

/// Why no token could be drawn.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SamplerError {
    /// An empty row of logits.
    #[error("no logits to sample from")]
    EmptyLogits,

    /// Token ids are `u32`, as in GGUF vocabularies.
    #[error("{len} logits do not fit u32 token ids")]
    VocabTooLarge {
        /// The row's length.
        len: usize,
    },

    /// Every logit is NaN or -inf (NaN counts as -inf), or the parameters pushed every
    /// surviving logit to -inf: no token has a nonzero probability.
    #[error("no finite logit: every candidate has probability zero")]
    NoFiniteLogits,
}
