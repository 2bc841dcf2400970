//! The vocabulary: each token's text, score and attributes, and the reverse map text -> id.
//!
//! Read from `tokenizer.ggml.tokens`, `.scores` and `.token_type` as llama.cpp's
//! `llama_vocab::impl::load` reads them: scores may be f32 or i32 and default to 0, types
//! default to NORMAL, an empty token becomes `[EMPTY_<id>]`, and a duplicate text is an error.

use std::collections::HashMap;

use rullama_gguf::{Array, Metadata, Value};

use crate::error::{Result, TokenizerError};

pub const KEY_TOKENS: &str = "tokenizer.ggml.tokens";
pub const KEY_SCORES: &str = "tokenizer.ggml.scores";
pub const KEY_TOKEN_TYPE: &str = "tokenizer.ggml.token_type";

/// A token's attributes: llama.cpp's `llama_token_attr` bits, derived from the GGUF token type
/// and then adjusted by name (see `special.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TokenAttr(u16);

impl TokenAttr {
    /// No bit set: a token type GGUF does not define.
    pub const UNDEFINED: TokenAttr = TokenAttr(0);
    /// The unknown token.
    pub const UNKNOWN: TokenAttr = TokenAttr(1 << 0);
    /// A placeholder never produced by encoding (`<unused12>`).
    pub const UNUSED: TokenAttr = TokenAttr(1 << 1);
    /// Ordinary text.
    pub const NORMAL: TokenAttr = TokenAttr(1 << 2);
    /// A control token (`<bos>`, `<start_of_turn>`): matched in text only when special
    /// tokens are parsed, decoded as nothing unless asked for.
    pub const CONTROL: TokenAttr = TokenAttr(1 << 3);
    /// A token added by the model's authors, matched in text whatever the options.
    pub const USER_DEFINED: TokenAttr = TokenAttr(1 << 4);
    /// A byte token `<0xXX>` (SPM's fallback for text no token covers).
    pub const BYTE: TokenAttr = TokenAttr(1 << 5);

    /// GGUF's `token_type` values: 1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused,
    /// 6 byte; anything else is undefined.
    pub fn from_token_type(t: i32) -> TokenAttr {
        match t {
            1 => TokenAttr::NORMAL,
            2 => TokenAttr::UNKNOWN,
            3 => TokenAttr::CONTROL,
            4 => TokenAttr::USER_DEFINED,
            5 => TokenAttr::UNUSED,
            6 => TokenAttr::BYTE,
            _ => TokenAttr::UNDEFINED,
        }
    }

    /// Whether any bit of `other` is set.
    pub fn intersects(self, other: TokenAttr) -> bool {
        self.0 & other.0 != 0
    }

    pub(crate) fn insert(&mut self, other: TokenAttr) {
        self.0 |= other.0;
    }
}

impl std::ops::BitOr for TokenAttr {
    type Output = TokenAttr;
    fn bitor(self, rhs: TokenAttr) -> TokenAttr {
        TokenAttr(self.0 | rhs.0)
    }
}

#[derive(Debug, Clone)]
pub struct Vocab {
    texts: Vec<Box<str>>,
    scores: Vec<f32>,
    attrs: Vec<TokenAttr>,
    ids: HashMap<Box<str>, u32>,
    max_token_len: usize,
}

impl Vocab {
    pub fn from_metadata(md: &Metadata) -> Result<Vocab> {
        let tokens = md.get_str_array(KEY_TOKENS)?;
        let n = tokens.len();
        if u32::try_from(n).is_err() {
            return Err(TokenizerError::InvalidVocab(format!(
                "{n} tokens do not fit u32 ids"
            )));
        }
        let scores = read_scores(md, n)?;
        let attrs = match md.get(KEY_TOKEN_TYPE) {
            None => vec![TokenAttr::NORMAL; n],
            Some(_) => {
                let types = md.get_i32_array(KEY_TOKEN_TYPE)?;
                check_len(KEY_TOKEN_TYPE, types.len(), n)?;
                types[..n]
                    .iter()
                    .map(|&t| TokenAttr::from_token_type(t))
                    .collect()
            }
        };
        let mut texts = Vec::with_capacity(n);
        let mut ids = HashMap::with_capacity(n);
        let mut max_token_len = 0;
        for (id, text) in tokens.iter().enumerate() {
            let text: Box<str> = if text.is_empty() {
                format!("[EMPTY_{id}]").into()
            } else {
                text.as_str().into()
            };
            max_token_len = max_token_len.max(text.len());
            // `n` fits u32, checked above.
            if let Some(first) = ids.insert(text.clone(), id as u32) {
                return Err(TokenizerError::InvalidVocab(format!(
                    "duplicate token {text:?} has ids {first} and {id}"
                )));
            }
            texts.push(text);
        }
        Ok(Vocab {
            texts,
            scores,
            attrs,
            ids,
            max_token_len,
        })
    }

    pub fn len(&self) -> usize {
        self.texts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.texts.is_empty()
    }

    /// The id of the token spelled exactly `text`, of any type.
    #[inline]
    pub fn id(&self, text: &str) -> Option<u32> {
        self.ids.get(text).copied()
    }

    /// Callers index with ids that came from this vocabulary or were range-checked.
    #[inline]
    pub fn text(&self, id: u32) -> &str {
        &self.texts[id as usize]
    }

    #[inline]
    pub fn score(&self, id: u32) -> f32 {
        self.scores[id as usize]
    }

    #[inline]
    pub fn attr(&self, id: u32) -> TokenAttr {
        self.attrs[id as usize]
    }

    pub fn attr_mut(&mut self, id: u32) -> &mut TokenAttr {
        &mut self.attrs[id as usize]
    }

    pub fn contains(&self, id: u32) -> bool {
        (id as usize) < self.texts.len()
    }

    pub fn max_token_len(&self) -> usize {
        self.max_token_len
    }

    /// Ids in order with their texts.
    pub fn iter(&self) -> impl Iterator<Item = (u32, &str)> {
        self.texts.iter().enumerate().map(|(i, t)| (i as u32, &**t))
    }
}

fn check_len(key: &str, len: usize, n_tokens: usize) -> Result<()> {
    if len < n_tokens {
        return Err(TokenizerError::InvalidVocab(format!(
            "{key} has {len} entries for {n_tokens} tokens"
        )));
    }
    Ok(())
}

/// Scores are f32 in every file we know, but llama.cpp also accepts i32.
fn read_scores(md: &Metadata, n: usize) -> Result<Vec<f32>> {
    match md.get(KEY_SCORES) {
        None => Ok(vec![0.0; n]),
        Some(Value::Array(Array::I32(v))) => {
            check_len(KEY_SCORES, v.len(), n)?;
            Ok(v[..n].iter().map(|&s| s as f32).collect())
        }
        Some(_) => {
            let v = md.get_f32_array(KEY_SCORES)?;
            check_len(KEY_SCORES, v.len(), n)?;
            Ok(v[..n].to_vec())
        }
    }
}
