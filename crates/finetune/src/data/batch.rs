//! One training step's input: rows of tokens, the loss mask, and where each example lies in
//! its row.

/// Where one example lies in a row: tokens `start..start + len`.
///
/// A padded row holds one example at `start` 0; a packed row holds several back to back.
/// Attention must not cross from one example into another, and positions (RoPE) restart at
/// each example's `start`, so that a packed example is computed exactly as it would be alone
/// in its row. Tokens after the last span are padding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    /// First token in the row.
    pub start: usize,
    /// Tokens.
    pub len: usize,
}

/// `rows` × `width` tokens, row-major, with a loss mask and the examples' spans.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Batch {
    /// Rows (sequences of the step); the last batch of an epoch may have fewer than asked.
    pub rows: usize,
    /// Tokens a row: the longest example when padding, the context when packing.
    pub width: usize,
    /// `rows * width` token ids; padding is the pad id.
    pub tokens: Vec<u32>,
    /// `rows * width` flags: whether each token is a target of the loss (see
    /// [`Sequence`](super::Sequence)); false on padding and on each example's first token.
    pub mask: Vec<bool>,
    /// Each row's examples, in order.
    pub spans: Vec<Vec<Span>>,
    /// The dataset index of each example, in the order of the rows and spans.
    pub examples: Vec<usize>,
}

impl Batch {
    /// Row `r`'s tokens.
    pub fn row(&self, r: usize) -> &[u32] {
        &self.tokens[r * self.width..(r + 1) * self.width]
    }

    /// Row `r`'s loss mask.
    pub fn row_mask(&self, r: usize) -> &[bool] {
        &self.mask[r * self.width..(r + 1) * self.width]
    }

    /// Tokens the loss counts.
    pub fn trainable(&self) -> usize {
        self.mask.iter().filter(|&&m| m).count()
    }

    /// Tokens that belong to an example (not padding).
    pub fn real_tokens(&self) -> usize {
        self.spans.iter().flatten().map(|s| s.len).sum()
    }

    /// Each token's position within its example (`rows * width`): 0 at each span's start;
    /// padding gets 0.
    pub fn positions(&self) -> Vec<u32> {
        let mut out = vec![0; self.tokens.len()];
        for (r, spans) in self.spans.iter().enumerate() {
            for span in spans {
                let at = r * self.width + span.start;
                for (p, slot) in out[at..at + span.len].iter_mut().enumerate() {
                    *slot = p as u32;
                }
            }
        }
        out
    }
}
