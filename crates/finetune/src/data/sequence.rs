//! A tokenized example: its tokens and which of them the loss counts.

/// Tokens and a loss mask of the same length.
///
/// `mask[j]` says whether token `j` is a *target*: whether the loss includes the model's
/// prediction of token `j` from tokens `0..j` (Hugging Face's `labels[j] != -100` before the
/// shift). `mask[0]` is always false, since nothing precedes the first token to predict it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sequence {
    tokens: Vec<u32>,
    mask: Vec<bool>,
    cut: usize,
}

impl Sequence {
    /// A sequence of `tokens` with loss mask `mask`; `mask[0]` is cleared (see the type's
    /// docs). `None` if the lengths differ.
    pub fn new(tokens: Vec<u32>, mut mask: Vec<bool>) -> Option<Sequence> {
        if tokens.len() != mask.len() {
            return None;
        }
        if let Some(first) = mask.first_mut() {
            *first = false;
        }
        Some(Sequence {
            tokens,
            mask,
            cut: 0,
        })
    }

    /// The tokens.
    pub fn tokens(&self) -> &[u32] {
        &self.tokens
    }

    /// The loss mask, one flag a token.
    pub fn mask(&self) -> &[bool] {
        &self.mask
    }

    /// Tokens.
    pub fn len(&self) -> usize {
        self.tokens.len()
    }

    /// Whether there is no token.
    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    /// Tokens the loss counts.
    pub fn trainable(&self) -> usize {
        self.mask.iter().filter(|&&m| m).count()
    }

    /// Tokens removed from the end by [`Sequence::cut_to`].
    pub fn cut(&self) -> usize {
        self.cut
    }

    /// Keep the first `ctx` tokens (the start holds the prompt a completion needs); returns
    /// how many were removed.
    pub fn cut_to(&mut self, ctx: usize) -> usize {
        let removed = self.tokens.len().saturating_sub(ctx);
        self.tokens.truncate(ctx);
        self.mask.truncate(ctx);
        self.cut += removed;
        removed
    }
}
